"""Shared pieces of the benchmarks (DESIGN §6): models, interleaved timing, the machine, RESULTS.md sections.

Every figure is a ratio of a fast path to its baseline measured in the same process, with the two timed in
alternation (A, B, A, B, ...) so that load from other processes on a shared machine falls on both alike; the
median of the repeats is reported. Absolute seconds are printed beside the ratio for orientation only.

Models: the tiny random Llama of the test suite (tests/fixtures_models.py, hidden 64; layers configurable) and,
with ``--smollm2``, SmolLM2-135M-Instruct from the zoo cache (fetched once from the package registry).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import re
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
sys.path.insert(0, str(ROOT / "tests"))  # tests/fixtures_models.py builds the tiny model

HEADER = """# Benchmark results

Each figure compares a fast path with its baseline in the same run and is reported as a ratio:
the machines are shared and noisy, so absolute seconds are for orientation only. Reproduce with `make bench`
(tiny random models, about a minute) or `make bench BENCH_ARGS=--smollm2` (adds SmolLM2-135M-Instruct from the
zoo cache; about an hour on 2 CPU cores: the naive UDS baseline, real sampling at seed 003's setting,
OpenUnlearning's own evaluator when `REMNANT_OPENUNLEARNING_SRC` names their checkout, bench_eval.py, and the UDS
reference code over a pool when `REMNANT_UDS_REFERENCE` names its checkout, bench_uds_pool.py, about 20 minutes).
Each script rewrites only its own section below; the machine line of a section says where it ran.
"""


@dataclass(frozen=True)
class Timing:
    """Median seconds of a fast path and its baseline, timed in alternation, and what each returned last."""

    fast: float
    base: float
    repeats: int
    fast_result: Any = None
    base_result: Any = None

    @property
    def speedup(self) -> float:
        return self.base / self.fast if self.fast > 0 else float("inf")


def compare(
    fast: Callable[[], Any], base: Callable[[], Any], *, repeats: int = 3, warmup: bool = True
) -> Timing:
    """Time ``fast`` and ``base`` alternately ``repeats`` times each (after one untimed warm-up of each)."""
    if warmup:
        fast()
        base()
    f: list[float] = []
    b: list[float] = []
    fast_out = base_out = None
    for _ in range(repeats):
        start = time.perf_counter()
        fast_out = fast()
        f.append(time.perf_counter() - start)
        start = time.perf_counter()
        base_out = base()
        b.append(time.perf_counter() - start)
    return Timing(statistics.median(f), statistics.median(b), repeats, fast_out, base_out)


def timed(fn: Callable[[], Any], *, repeats: int = 3) -> float:
    """Median seconds of ``fn`` over ``repeats`` runs after one warm-up."""
    fn()
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return statistics.median(out)


def machine() -> str:
    """One line describing where a section was measured."""
    import torch
    import transformers

    cpu = platform.processor() or platform.machine()
    try:
        text = Path("/proc/cpuinfo").read_text()
        found = re.search(r"model name\s*:\s*(.+)", text)
        if found:
            cpu = found.group(1).strip()
    except OSError:
        pass
    try:
        load = f"load average {os.getloadavg()[0]:.1f}"
    except OSError:
        load = "load unknown"
    device = "CPU"
    if torch.cuda.is_available():
        device = f"GPU {torch.cuda.get_device_name(0)}"
    return (
        f"{device}; {cpu}, {os.cpu_count()} cores, torch threads {torch.get_num_threads()}, {load} at start; "
        f"Python {platform.python_version()}, torch {torch.__version__}, transformers {transformers.__version__}"
    )


def tiny_model(layers: int = 2, seed: int = 0) -> tuple[Any, Any]:
    """The test suite's tiny random Llama (hidden 64, its ~512-word tokenizer) with ``layers`` blocks, eval mode."""
    import torch
    from transformers import AutoModelForCausalLM

    from fixtures_models import _config, build_tokenizer

    tok = build_tokenizer()
    config = _config("llama", len(tok), tok)
    config.num_hidden_layers = layers
    with torch.random.fork_rng(devices=[]):
        torch.random.manual_seed(seed)  # scoped by fork_rng, as in the test fixture: no global seed leaks out
        model = AutoModelForCausalLM.from_config(config)
    model.eval()
    model.generation_config.pad_token_id = tok.pad_token_id
    return model, tok


def smollm2() -> tuple[Any, Any]:
    """SmolLM2-135M-Instruct (fp32, CPU) from the zoo cache."""
    from remnant.models import load_model, zoo

    folder = zoo.cached("smollm2-135m-instruct") or zoo.fetch("smollm2-135m-instruct")
    state = load_model(folder)
    state.model.eval()
    return state.model, state.tokenizer


def models(args: argparse.Namespace, *, tiny_layers: int = 2) -> list[tuple[str, Any, Any]]:
    """The models a benchmark runs on: the tiny Llama, and SmolLM2 when ``--smollm2`` is given."""
    setup(args)
    model, tok = tiny_model(tiny_layers)
    out = [(f"tiny Llama ({tiny_layers} layers, hidden 64)", model, tok)]
    if args.smollm2:
        model, tok = smollm2()
        out.append(("SmolLM2-135M-Instruct (30 layers, fp32)", model, tok))
    return out


#: What ``busy_core`` runs: one thread of float32 matrix products, for as long as the benchmark runs.
BUSY_LOOP = "import torch\ntorch.set_num_threads(1)\na = torch.randn(768, 768)\nwhile True:\n    a = torch.tanh(a @ a)\n"


@contextlib.contextmanager
def busy_core() -> Iterator[None]:
    """Another process keeps one core busy with matrix products (memory traffic and all) while the block runs:
    the benchmark as it runs beside someone else's work."""
    import subprocess

    proc = subprocess.Popen([sys.executable, "-c", BUSY_LOOP], env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        time.sleep(2.0)  # started, and counted in the load average the machine line prints
        yield
    finally:
        proc.kill()
        proc.wait()


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--smollm2", action="store_true", help="also run on SmolLM2-135M-Instruct (zoo cache)")
    p.add_argument("--repeats", type=int, default=3, help="timed repeats of each side (median reported)")
    p.add_argument("--no-write", action="store_true", help="print the section, leave RESULTS.md alone")
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch intra-op threads (default 1: on a loaded 2-core machine more threads make tiny models "
        "far slower, and both sides of every ratio use the same setting)",
    )
    return p


def setup(args: argparse.Namespace) -> None:
    """Apply the thread setting before any model runs."""
    import torch

    torch.set_num_threads(args.threads)


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def write_section(name: str, title: str, body: str, *, write: bool = True) -> str:
    """Replace (or append) the section ``name`` of RESULTS.md; returns the section's text."""
    section = (
        f"<!-- begin {name} -->\n## {title}\n\n_Measured {time.strftime('%Y-%m-%d')} on {machine()}._\n\n"
    )
    section += body.strip() + f"\n<!-- end {name} -->\n"
    print(section)
    if not write:
        return section
    text = RESULTS.read_text(encoding="utf-8") if RESULTS.exists() else HEADER
    pattern = re.compile(rf"<!-- begin {re.escape(name)} -->.*?<!-- end {re.escape(name)} -->\n", re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: section, text)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    RESULTS.write_text(text, encoding="utf-8")
    return section
