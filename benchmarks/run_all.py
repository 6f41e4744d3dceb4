"""Run every benchmark in turn (``make bench``); arguments are passed to each (e.g. ``--smollm2``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS = (
    "bench_greedy_match.py",
    "bench_choice.py",
    "bench_sampling.py",
    "bench_uds.py",
    "bench_uds_pool.py",  # needs REMNANT_UDS_REFERENCE (the UDS reference's checkout); says so without it
    "bench_train.py",
    "bench_generate.py",
    "bench_throughput.py",
    "bench_scaling.py",
    "bench_eval.py",  # needs REMNANT_OPENUNLEARNING_SRC (their checkout); says so and measures nothing without it
    "bench_sweep.py",  # needs the ray extra (make installs it)
    "bench_startup.py",  # the core commands' start-up against a bare interpreter (a light start)
)


def main() -> int:
    failed = []
    for script in SCRIPTS:
        print(f"== {script}", flush=True)
        if subprocess.call([sys.executable, str(HERE / script), *sys.argv[1:]]) != 0:
            failed.append(script)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
