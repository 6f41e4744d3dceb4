"""`make demo` on this machine: wall time per removal and in total, and the verdicts it reached (issue 6).

Not a ratio: the demo's promise is absolute (under 20 minutes on 2 cores, DESIGN §5), so this section reports
its own seconds, from the ``demo.json`` every ``remnant demo`` run writes. Either point it at a finished run
(``--from remnant-demo/demo.json``, e.g. the one ``make demo`` just wrote on a fresh clone, with that clone's
``make demo`` wall time, venv set-up included, as ``--make-wall``), or let it run ``remnant demo --quick`` into a
temporary folder itself. Not part of ``run_all.py``: it takes a quarter of an hour.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from _common import parser, table, write_section


def main() -> int:
    p = parser(__doc__.split("\n\n")[0])
    p.add_argument("--from", dest="source", type=Path, default=None, help="a finished run's demo.json")
    p.add_argument("--make-wall", type=float, default=None, help="seconds `make demo` took, set-up included")
    args = p.parse_args()
    if args.source is None:
        from remnant.demo import run_demo

        out = Path(tempfile.mkdtemp(prefix="remnant-demo-"))
        run_demo(out, quick=True)
        args.source = out / "demo.json"
    demo = json.loads(args.source.read_text(encoding="utf-8"))
    rows = [
        [
            r["name"],
            r["expected"],
            f"**{r['verdict']}**",
            "—" if r["g_star"] is None else f"{r['g_star']:.3f}",
            "—" if r["removal_stage_utility"] is None else f"{r['removal_stage_utility']:.3f}",
            str(r["smallest_n"]),
            r["tier"],
            f"{r['seconds'] / 60:.1f}",
        ]
        for r in demo["results"]
    ]
    header = ["removal", "expected", "verdict", "g*", "u (removal stage)", "n", "tier", "minutes"]
    total = demo["seconds_total"] / 60
    lines = [
        f"`remnant demo {'--quick' if demo['quick'] else ''}` on {demo['model']}: {total:.1f} min in all"
        + (
            f"; `make demo` on a fresh clone, venv set-up included: {args.make_wall / 60:.1f} min"
            if args.make_wall
            else ""
        )
        + ". The first removal's minutes include installing the pack and the control's and pre-removal model's"
        " cells, which the other two reuse.",
        "",
        table(header, rows),
    ]
    write_section("demo", "`make demo`: wall time and verdicts", "\n".join(lines), write=not args.no_write)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
