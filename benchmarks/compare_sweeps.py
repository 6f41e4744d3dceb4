"""Do two sweep folders hold the same records, order aside? (docs/sweep.md: the local and the Ray executor.)

    .venv/bin/python benchmarks/compare_sweeps.py SWEEP_A SWEEP_B

Compares every cell record and observation of ``A/records.jsonl`` and ``B/records.jsonl`` as sets, field for
field, less each cell's ``elapsed_s`` (wall time differs between any two runs) and less failed records that a
``--retry-failed`` run superseded. Prints the counts and up to two records found in one store only; exits 0 when
the sets are equal, 1 otherwise.
"""

from __future__ import annotations

import sys
from pathlib import Path

from remnant.records import RECORDS_FILE
from remnant.sweep.compare import comparable_records


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    a, b = (comparable_records(Path(p) / RECORDS_FILE) for p in argv)
    print(f"{len(a)} records in {argv[0]}, {len(b)} in {argv[1]}: ", end="")
    if a == b:
        print("identical, order aside")
        return 0
    print(f"{len(a - b)} only in the first, {len(b - a)} only in the second")
    for tag, only in (("first", a - b), ("second", b - a)):
        for line in sorted(only)[:2]:
            print(f"  only in the {tag}: {line[:400]}")
    return 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
