"""Are the records and outputs of the tiny paths the same under two versions of the code? (a refactor's check)

Runs, on the tiny random Llama, with the code of ``--old`` (a git worktree) and then with this checkout: the tiny
assessment with three audit tables (``remnant preregister`` + ``assess``), the tiny sweep with NF4 and relearning,
``remnant eval`` on a TOFU and a MUSE folder, and the goodhart, readmission-direction and latent-probe studies
(tiny presets). Then compares every output file, times, run ids, chain links and the run folders' paths masked,
and prints each that differs. Both sides run in one folder, so paths and the digests over them agree; digests
over files that hold a time (prereg.json, the manifest and statement the report names) are masked. Not a test:
82 s for both sides on two cores.

    .venv/bin/python benchmarks/records_identity.py --old acf5616 --out /tmp/records-identity
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KEYS = (
    "time|timestamp|started|finished|elapsed|seconds|wall_s|created|at|prev|chain|hash|run_id|token|duration_s|"
    "elapsed_s|head|records_head|chain_head|date|frozen_at|recorded_at|python|sha256_of_records|line_digest|"
    # digests over a file that holds a time: prereg.json (its freeze time) and, through it, the manifest
    r"prereg\.json|manifest_ref"
)
MASK = re.compile(r'("(?:' + KEYS + r')"\s*:\s*)("[^"]*"|[0-9.eE+-]+)')
SKIPPED_PARTS = {"home", "ckpt", "states", "latent-cache", "pack", "tofu", "muse", "runs"}


def _paths(out: Path, model: Path) -> None:
    """Every records-writing path once, with whatever ``remnant`` is on sys.path."""
    sys.path[:0] = [
        str(ROOT / "tests"),
        str(ROOT / "tests" / "integration"),
        str(ROOT / "tests" / "unit" / "sweep"),
    ]
    sys.path.insert(0, str(ROOT / "tests" / "unit" / "formats"))
    import test_assess_audits
    from assess_fixtures import tiny_pack, write_config
    from formats_data import write_muse, write_tofu
    from sweep_fixtures import tiny_spec, write_spec

    from remnant.cli import main

    cfg = write_config(out / "a" / "config.toml", pack=tiny_pack(out / "a" / "pack"), control=model,
                       **{"[seeds]": test_assess_audits.AUDITS})  # fmt: skip
    run = str(out / "a" / "run")
    spec = write_spec(out / "p", tiny_spec(model, out / "p" / "store", relearn=True))
    write_tofu(out / "tofu")
    write_muse(out / "muse")
    commands = [
        ["preregister", str(cfg), "--out", run],
        ["assess", str(cfg), "--out", run, "--quiet"],
        ["sweep", "run", str(spec), "--out", str(out / "p" / "out"), "--quiet"],
        ["eval", str(model), "--data", str(out / "tofu"), "--out", str(out / "e_tofu"), "--no-progress"],
        ["eval", str(model), "--data", str(out / "muse"), "--out", str(out / "e_muse"), "--no-progress"],
        ["study", "goodhart", "--model", str(model), "--preset", "tiny", "--out", str(out / "g"), "--quiet"],
        [
            "study",
            "readmission",
            "direction",
            "--model",
            str(model),
            "--preset",
            "tiny",
            "--out",
            str(out / "r"),
        ]
        + ["--quiet"],
        [
            "study",
            "latent-probe",
            "--model",
            str(model),
            "--preset",
            "tiny",
            "--out",
            str(out / "l"),
            "--quiet",
        ],
    ]
    for command in commands:
        print(" ".join(command[:2]), main(command), flush=True)


def _normalised(path: Path) -> str:
    text = path.read_text(errors="replace")
    text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?", "TS", text)
    text = re.sub(r"\b\d+(\.\d+)? ?s\b", "Ns", text)
    text = re.sub(r'(<dd class="mono">)sha256:[0-9a-f]{64}', r"\1sha256:X", text)  # the report's file digests
    return MASK.sub(r'\1"X"', text)


def compare(old: Path, new: Path) -> int:
    """Print every output file that differs (or is missing) between the two trees; the number that do."""
    differ = compared = 0
    for a in sorted(p for p in old.rglob("*") if p.is_file()):
        rel = a.relative_to(old)
        if SKIPPED_PARTS & set(rel.parts) or rel.suffix in (".log", ".safetensors", ".lock", ".torn"):
            continue
        b = new / rel
        compared += 1
        if not b.exists() or _normalised(a) != _normalised(b):
            differ += 1
            lines = list(zip(_normalised(a).splitlines(), _normalised(b).splitlines(), strict=False))
            first = next(((x[:200], y[:200]) for x, y in lines if x != y), None) if b.exists() else "missing"
            print("DIFFERS", rel, first)
    print(f"{compared} files compared, {differ} differ")
    return differ


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, help="git revision whose outputs this checkout's must equal")
    parser.add_argument("--out", type=Path, required=True, help="scratch folder (replaced)")
    parser.add_argument("--side", nargs=2, metavar=("OUT", "MODEL"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        _paths(Path(args.side[0]), Path(args.side[1]))
        return 0
    shutil.rmtree(args.out, ignore_errors=True)
    worktree, model = args.out / "old-src", args.out / "tiny"
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(worktree), args.old], check=True
    )
    try:
        sys.path.insert(0, str(ROOT / "tests"))
        from fixtures_models import build_tiny_model

        build_tiny_model("llama", model)
        # both sides write into the same folder, then move: paths inside configs (and their digests) agree
        here = args.out / "run"
        for side, src in (("old", worktree / "src"), ("new", ROOT / "src")):
            env = {**os.environ, "PYTHONPATH": str(src), "REMNANT_HOME": str(here / "home")}
            argv = [sys.executable, __file__, "--old", args.old, "--out", str(args.out), "--side"]
            subprocess.run([*argv, str(here), str(model)], env=env, check=True, cwd=args.out)
            here.rename(args.out / side)
        return 1 if compare(args.out / "old", args.out / "new") else 0
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(worktree)], check=False)


if __name__ == "__main__":
    raise SystemExit(main())
