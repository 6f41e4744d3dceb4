"""GPU check: ``remnant eval``, the UDS audit and a tiny sweep on a CUDA device in bf16 and fp32, each against the
same work on the CPU in fp32, within the tolerances stated below; throughput against the device's measured peak.

Parts (each run on ``--device`` in every ``--dtypes`` entry, and once on the CPU in fp32 as the reference):

- ``eval``: the full TOFU suite of benchmarks/bench_eval.py (the 12 teacher-forced metrics, forget_Q_A_ROUGE and
  mia_gradnorm) through ``remnant eval`` itself (:func:`remnant.cli.main`) on a minted Class D canary pack
  exported as TOFU, on SmolLM2-135M-Instruct from the zoo cache, ``--model DIR``, or ``--tiny``. Every number of
  the two logs is compared; greedy generations are compared as texts (the share identical to the CPU's). The
  phases' seconds are taken inside that run (the teacher-forced pass, generation, gradient norms), and tokens/s
  with them.
- ``uds``: the two-stage UDS (:func:`remnant.latent.uds.uds`) with the model as full and two weight-perturbed
  copies as retain and audited source (benchmarks/bench_uds.py's stand-ins): every Δ1, Δ2 and the score compared.
- ``sweep``: the smallest pool of benchmarks/bench_sweep.py (full install, retain-only install, one NPO removal,
  two field metrics, κ, UDS) on the tiny random Llama, built and measured on the device by the local executor;
  its results table compared cell by cell. It trains, so its tolerances are the loosest.

The peak is measured, not looked up: a timed square ``torch.matmul`` in each dtype. Throughput is also given as
model FLOP/s (2 × parameters per token, the forward's multiply-adds) over that peak.

``--device cpu`` runs the same on the CPU against itself (fp32 equal to the reference by construction), so the
script is tested without a GPU (tests/unit/bench/test_gpu_check.py). Writes everything it prints, and every
difference, to ``--out`` (JSON). Exit status 1 when a check fails, 0 when all hold. Not part of ``make bench``.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import csv
import dataclasses
import io
import json
import math
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine  # noqa: E402


@dataclass(frozen=True)
class Tolerance:
    """|device − cpu| ≤ atol + rtol·|cpu| for every number; ``generations``: the least share of greedy
    generations identical to the CPU's."""

    rtol: float
    atol: float
    generations: float

    def holds(self, device: float, cpu: float) -> bool:
        return abs(device - cpu) <= self.atol + self.rtol * abs(cpu)


#: fp32 on the GPU against fp32 on the CPU (TF32 off): the same arithmetic reduced in another order (cuBLAS and the
#: CPU BLAS tile differently), ~1e-7 relative per reduction, ~1e-5 after 30 layers and a 49,152-word
#: log-softmax; 1e-4 relative on log-probabilities leaves a factor 10. atol 1e-6 covers numbers near 0. A greedy
#: generation may take another token where two logits tie to 1e-5, so 90 % must be identical, not all.
EVAL_FP32 = Tolerance(rtol=1e-4, atol=1e-6, generations=0.9)
#: bf16 against the fp32 reference: bf16 keeps 8 significant bits (2^-9 ≈ 2e-3 relative per rounding) in every
#: weight and activation; remnant upcasts logits to fp32 before the log-softmax, so a mean NLL moves by ~1e-2
#: relative; 5e-2 relative and absolute (an AUC moves by 1/625 per swapped forget-holdout pair at 25 + 25 rows)
#: leave room. Greedy texts drift once one token flips: half must be identical.
EVAL_BF16 = Tolerance(rtol=5e-2, atol=5e-2, generations=0.5)
#: UDS: a Δ_l is a difference of two mean log-probs, so its error is absolute: the fp32 bound above times a
#: log-prob of ~10 nats; bf16: 0.1 nat (a Δ1 > τ = 0.05 KE decision can flip only for layers within that of τ).
UDS_FP32 = Tolerance(rtol=1e-4, atol=1e-4, generations=1.0)
UDS_BF16 = Tolerance(rtol=5e-2, atol=1e-1, generations=1.0)
#: The sweep trains (install, NPO) before it measures: rounding differences grow with every optimiser step, and
#: κ is a count, so one item changing sides moves a rate by 1/n. fp32: 1e-3 relative; bf16: 0.15 absolute.
SWEEP_FP32 = Tolerance(rtol=1e-3, atol=1e-4, generations=1.0)
SWEEP_BF16 = Tolerance(rtol=1e-1, atol=1.5e-1, generations=1.0)
TOLERANCES = {
    "eval": {"fp32": EVAL_FP32, "bf16": EVAL_BF16},
    "uds": {"fp32": UDS_FP32, "bf16": UDS_BF16},
    "sweep": {"fp32": SWEEP_FP32, "bf16": SWEEP_BF16},
}
TORCH_DTYPES = {"fp32": "float32", "bf16": "bfloat16"}


# ---------------------------------------------------------------------------------------------- comparison


def numbers(value: Any, path: str = "") -> Iterator[tuple[str, float]]:
    """Every number in a JSON value, keyed by its path (booleans and texts are not numbers)."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from numbers(item, f"{path}/{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from numbers(item, f"{path}/{i}")
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield path, float(value)


def texts(value: Any, key: str, path: str = "") -> Iterator[tuple[str, str]]:
    """Every string stored under ``key`` in a JSON value, keyed by its path."""
    if isinstance(value, dict):
        for k, item in value.items():
            if k == key and isinstance(item, str):
                yield f"{path}/{k}", item
            else:
                yield from texts(item, key, f"{path}/{k}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from texts(item, key, f"{path}/{i}")


def compare(device: Any, cpu: Any, tol: Tolerance) -> dict[str, Any]:
    """Number by number: how many, how many outside ``tol``, the largest absolute and relative differences (by
    top-level key), the paths of the first few outside; generations: the share identical."""
    ours, ref = dict(numbers(device)), dict(numbers(cpu))
    missing = sorted(set(ours) ^ set(ref))
    outside: list[str] = []
    largest: dict[str, float] = {}
    largest_rel = 0.0
    for path in sorted(set(ours) & set(ref)):
        a, b = ours[path], ref[path]
        if math.isnan(a) and math.isnan(b):
            continue
        diff = abs(a - b) if math.isfinite(a) and math.isfinite(b) else (0.0 if a == b else math.inf)
        top = path.split("/")[1] if path.count("/") else path
        largest[top] = max(largest.get(top, 0.0), diff)
        largest_rel = max(largest_rel, diff / abs(b) if b else (0.0 if diff == 0 else math.inf))
        if not tol.holds(a, b):
            outside.append(path)
    gens, ref_gens = dict(texts(device, "generation")), dict(texts(cpu, "generation"))
    same = sum(gens.get(p) == g for p, g in ref_gens.items())
    share = same / len(ref_gens) if ref_gens else 1.0
    ok = not missing and not outside and share >= tol.generations
    return {
        "ok": ok,
        "tolerance": dataclasses.asdict(tol),
        "numbers": len(set(ours) & set(ref)),
        "outside": len(outside),
        "outside_first": outside[:10],
        "missing": missing[:10],
        "largest_abs": max(largest.values(), default=0.0),
        "largest_rel": largest_rel,
        "largest_abs_by_key": largest,
        "generations": len(ref_gens),
        "generations_identical": share,
    }


# ---------------------------------------------------------------------------------------------- the device


def sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def matmul_peak(device: str, dtype: str, n: int, repeats: int = 10) -> float:
    """FLOP/s of an ``n``×``n`` matmul in ``dtype`` on ``device`` (2n³ per product), best of ``repeats``."""
    import torch

    gen = torch.Generator().manual_seed(0)
    kind = getattr(torch, TORCH_DTYPES[dtype])
    a = torch.randn(n, n, generator=gen).to(device=device, dtype=kind)
    b = torch.randn(n, n, generator=gen).to(device=device, dtype=kind)
    torch.matmul(a, b)  # warm-up: kernel selection and allocation are not the peak
    sync(device)
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        torch.matmul(a, b)
        sync(device)
        best = min(best, time.perf_counter() - start)
    return 2.0 * n**3 / best


@dataclass
class Phases:
    """Seconds and tokens of the eval phases, taken by wrapping remnant's own phase functions during one run."""

    device: str
    seconds: dict[str, float] = dataclasses.field(default_factory=dict)
    tokens: dict[str, int] = dataclasses.field(default_factory=dict)
    params: int = 0

    def timed(self, name: str, fn: Callable[..., Any], count: Callable[..., int]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            sync(self.device)
            start = time.perf_counter()
            out = fn(*args, **kwargs)
            sync(self.device)
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start
            self.tokens[name] = self.tokens.get(name, 0) + count(args, kwargs, out)
            self.params = self.params or sum(p.numel() for p in args[0].parameters())
            return out

        return wrapper


@contextlib.contextmanager
def phase_timing(phases: Phases) -> Iterator[None]:
    """Wrap the teacher-forced pass, greedy generation and gradient norms (looked up at call time by
    remnant.metrics.evaluate) for the duration of one evaluation."""
    from remnant.metrics import forward, generation, gradnorm

    def scored(args: Any, kwargs: Any, out: Any) -> int:
        return sum(len(s.input_ids) for s in args[1])

    def generated(args: Any, kwargs: Any, out: Any) -> int:
        # the generations come back as cut texts: their tokens are counted by re-encoding (a slight undercount
        # of what was generated past a stop string)
        tok = args[1]
        return sum(len(tok(text, add_special_tokens=False)["input_ids"]) for text in out)

    saved = [
        (forward, "teacher_forced_pass", "teacher-forced", scored),
        (generation, "greedy_generations", "generation", generated),
        (gradnorm, "gradnorm_pass", "gradient norms", scored),
    ]
    originals = [getattr(module, attr) for module, attr, _, _ in saved]
    for (module, attr, name, count), fn in zip(saved, originals, strict=True):
        setattr(module, attr, phases.timed(name, fn, count))
    try:
        yield
    finally:
        for (module, attr, _, _), fn in zip(saved, originals, strict=True):
            setattr(module, attr, fn)


def throughput(phases: Phases, peak: float) -> dict[str, Any]:
    """tokens/s of each phase, and model FLOP/s (2 × parameters per token) as a share of the matmul peak."""
    out: dict[str, Any] = {}
    for name, seconds in phases.seconds.items():
        rate = phases.tokens[name] / seconds if seconds > 0 else 0.0
        out[name] = {
            "seconds": seconds,
            "tokens": phases.tokens[name],
            "tokens_per_s": rate,
            "share_of_peak": 2.0 * phases.params * rate / peak if peak > 0 else None,
        }
    return out


# ---------------------------------------------------------------------------------------------- the parts


def eval_part(model: str, data: Path, device: str, dtype: str, work: Path, args: Any) -> dict[str, Any]:
    """One ``remnant eval`` of the full suite: its log and its phases."""
    from bench_eval import SUITES

    from remnant.cli import main as cli

    out = Path(tempfile.mkdtemp(dir=work, prefix=f"eval-{dtype}-")) / "out"  # the --out folder
    phases = Phases(device)
    argv = ["eval", model, "--data", str(data), "--out", str(out), "--metrics", ",".join(SUITES["all"])]
    argv += [
        "--dtype",
        dtype,
        "--device",
        device,
        "--no-progress",
        "--max-new-tokens",
        str(args.max_new_tokens),
    ]
    start = time.perf_counter()
    with phase_timing(phases), contextlib.redirect_stdout(io.StringIO()):
        code = cli(argv)
    if code != 0:
        raise RuntimeError(f"remnant eval exited {code}")
    return {
        "log": json.loads((out / "TOFU_EVAL.json").read_text()),
        "seconds": time.perf_counter() - start,
        "phases": phases,
    }


def uds_part(models: tuple[Any, Any, Any], tok: Any, device: str, dtype: str, n: int) -> dict[str, Any]:
    """The two-stage UDS on copies of the three CPU fp32 models moved to ``device`` in ``dtype``."""
    import torch
    from bench_uds import examples

    from remnant.latent.uds import UDSConfig, uds

    kind = getattr(torch, TORCH_DTYPES[dtype])
    full, retain, source = (copy.deepcopy(m).to(device=device, dtype=kind) for m in models)
    sync(device)
    start = time.perf_counter()
    result = uds(full, retain, source, tok, examples(n), UDSConfig(fast=True))
    sync(device)
    seconds = time.perf_counter() - start
    data = result.model_dump(mode="json")
    keep = {"score": data["score"], "n_scored": data["n_scored"]}
    keep["examples"] = [{"d1": e["d1"], "d2": e["d2"], "uds": e["uds"]} for e in data["examples"]]
    return {"result": keep, "seconds": seconds}


class DeviceExecutor:
    """The local executor with the device named, not detected: the reference runs on the CPU on a GPU machine."""

    name = "local"

    def __init__(self, device: str) -> None:
        from remnant.sweep.executors import LocalExecutor

        self.device = device
        self.inner = LocalExecutor(0, threads=1)
        self.inner.workspace = self.workspace  # type: ignore[method-assign]

    def workspace(self, ws: Any) -> Any:
        return dataclasses.replace(ws, device=self.device, threads=1 if self.device == "cpu" else 0)

    def run(self, ws: Any, tasks: Any) -> Any:
        return self.inner.run(ws, tasks)

    def close(self) -> None:
        self.inner.close()


def sweep_part(model: Path, device: str, dtype: str, work: Path) -> dict[str, Any]:
    """bench_sweep.py's one-removal pool on ``device`` in ``dtype``: its results table, cell by cell."""
    from bench_sweep import spec_text

    from remnant.cli import main as cli
    from remnant.sweep.driver import run_sweep
    from remnant.sweep.prepare import prepare

    folder = Path(tempfile.mkdtemp(dir=work, prefix=f"sweep-{dtype}-"))
    spec = folder / "spec.toml"
    spec.write_text(
        spec_text(model, folder / "store", 1).replace("[base]\n", f'[base]\ndtype = "{dtype}"\n', 1)
    )
    start = time.perf_counter()
    summary = run_sweep(
        prepare(spec, out=folder / "out"), folder / "out", DeviceExecutor(device), say=lambda m: None
    )
    seconds = time.perf_counter() - start
    with contextlib.redirect_stdout(io.StringIO()):
        if cli(["sweep", "report", str(folder / "out")]) != 0:
            raise RuntimeError("remnant sweep report failed")
    with (folder / "out" / "results.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    table: dict[str, dict[str, float | str]] = {}
    for row in rows:
        key = f"{row.pop('model')}|{row.pop('perturbation')}"
        table[key] = {k: _number(v) for k, v in row.items()}
    return {"result": table, "seconds": seconds, "cells": summary.computed}


def _number(text: str) -> float | str:
    try:
        return float(text)
    except ValueError:
        return text


# ---------------------------------------------------------------------------------------------- the run


def _model_dir(args: Any, work: Path) -> str:
    if args.tiny:
        from fixtures_models import build_tiny_model  # type: ignore[import-not-found]

        return str(build_tiny_model("llama", work / "tiny"))
    if args.model:
        return str(args.model)
    from remnant.models import zoo

    return str(zoo.cached("smollm2-135m-instruct") or zoo.fetch("smollm2-135m-instruct"))


def run_parts(args: Any, work: Path, report: dict[str, Any], say: Callable[[str], None]) -> None:
    """Every part on the reference and on each (device, dtype); a part that raises is recorded, not fatal."""
    from bench_eval import make_data

    model = _model_dir(args, work)
    configs = [("cpu", "fp32"), *((args.device, d) for d in args.dtypes)]
    peaks = {d: matmul_peak(args.device, d, args.peak_size) for d in args.dtypes}
    report["peak_flops"] = peaks
    say(
        "matmul peak on "
        + args.device
        + ": "
        + ", ".join(f"{d} {v / 1e12:.2f} TFLOP/s" for d, v in peaks.items())
    )
    if "eval" in args.parts:
        data = make_data(work)
        _part(
            report, "eval", configs, lambda dev, dt: eval_part(model, data, dev, dt, work, args), "log", say
        )
    if "uds" in args.parts:
        from remnant.models.load import load_model

        state = load_model(model, progress=False)
        from bench_uds import perturbed

        trio = (state.model, perturbed(state.model, 0.05, 1), perturbed(state.model, 0.02, 2))
        _part(
            report,
            "uds",
            configs,
            lambda dev, dt: uds_part(trio, state.tokenizer, dev, dt, args.uds_examples),
            "result",
            say,
        )
    if "sweep" in args.parts:
        from fixtures_models import build_tiny_model

        tiny = Path(build_tiny_model("llama", work / "sweep-tiny"))
        _part(report, "sweep", configs, lambda dev, dt: sweep_part(tiny, dev, dt, work), "result", say)


def _part(
    report: dict[str, Any],
    name: str,
    configs: list[tuple[str, str]],
    run: Callable[[str, str], dict[str, Any]],
    field: str,
    say: Callable[[str], None],
) -> None:
    out: dict[str, Any] = {}
    ref: Any = None
    for i, (device, dtype) in enumerate(configs):
        label = f"{device} {dtype}" + (" (reference)" if i == 0 else "")
        try:
            done = run(device, dtype)
        except Exception as exc:  # a part that fails on the device is a finding: record it, run the rest
            out[label] = {
                "error": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc()[-4000:],
            }
            say(f"{name} {label}: FAILED {type(exc).__name__}: {exc}")
            continue
        entry: dict[str, Any] = {"seconds": done["seconds"]}
        if "phases" in done:
            entry["throughput"] = throughput(done["phases"], report["peak_flops"].get(dtype, 0.0))
        if i == 0:
            ref = done[field]
        elif ref is not None:
            entry["agreement"] = compare(done[field], ref, TOLERANCES[name][dtype])
        else:
            entry["agreement"] = {"ok": False, "missing": ["the CPU reference failed"]}
        out[label] = entry
        say(_line(name, label, entry))
    report["parts"][name] = out


def _line(name: str, label: str, entry: dict[str, Any]) -> str:
    text = f"{name} {label}: {entry['seconds']:.1f} s"
    agree = entry.get("agreement")
    if agree is not None and "numbers" in agree:
        verdict = "OK" if agree["ok"] else "OUTSIDE TOLERANCE"
        text += (
            f"; {verdict}: {agree['numbers'] - agree['outside']}/{agree['numbers']} numbers within "
            f"rtol {agree['tolerance']['rtol']:g} + atol {agree['tolerance']['atol']:g}, largest |Δ| "
            f"{agree['largest_abs']:.1e}"
        )
        if agree["generations"]:
            text += f", generations identical {agree['generations_identical']:.0%}"
    elif agree is not None:
        text += "; not compared: " + "; ".join(agree["missing"])
    for phase, t in entry.get("throughput", {}).items():
        share = "" if t["share_of_peak"] is None else f" ({t['share_of_peak']:.2%} of the matmul peak)"
        text += f"; {phase} {t['tokens_per_s']:.0f} tok/s{share}"
    return text


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda", help="the device checked against the CPU (default cuda)")
    p.add_argument("--dtypes", default="bf16,fp32", help="dtypes run on --device (default bf16,fp32)")
    p.add_argument("--parts", default="eval,uds,sweep", help="parts to run (default eval,uds,sweep)")
    p.add_argument(
        "--model", type=Path, help="a model folder for eval and UDS (default: SmolLM2 from the zoo)"
    )
    p.add_argument(
        "--tiny", action="store_true", help="the tiny random Llama for eval and UDS (the CPU test)"
    )
    p.add_argument("--max-new-tokens", type=int, default=200, help="ROUGE generation length (theirs: 200)")
    p.add_argument("--uds-examples", type=int, default=8, help="UDS examples (default 8)")
    p.add_argument("--peak-size", type=int, default=8192, help="matmul side for the peak (default 8192)")
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (default: torch's own)")
    p.add_argument("--out", type=Path, required=True, help="the JSON report to write")
    args = p.parse_args(argv)
    args.dtypes = [d for d in args.dtypes.split(",") if d]
    args.parts = [x for x in args.parts.split(",") if x]
    bad = [d for d in args.dtypes if d not in TORCH_DTYPES] + [x for x in args.parts if x not in TOLERANCES]
    if bad:
        p.error(f"unknown dtype or part: {', '.join(bad)}")
    return args


def main(argv: list[str] | None = None) -> int:
    import torch

    from remnant.atomic import write_atomic
    from remnant.models.device import check_device

    args = parse(argv)
    args.device = check_device(args.device, where="--device")
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    # fp32 means fp32: TF32 matmuls would round to 10 mantissa bits and fail the fp32 tolerance for a reason
    # that is a setting, not remnant's arithmetic
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    printed: list[str] = []

    def say(line: str) -> None:
        printed.append(line)
        print(line, flush=True)

    report: dict[str, Any] = {
        "machine": machine(),
        "argv": sys.argv[1:] if argv is None else argv,
        "parts": {},
    }
    say(f"gpu_check on {report['machine']}")
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        run_parts(args, Path(tmp), report, say)
    failed = [
        f"{part} {label}"
        for part, runs in report["parts"].items()
        for label, entry in runs.items()
        if "error" in entry or not entry.get("agreement", {"ok": True})["ok"]
    ]
    say("all checks hold" if not failed else "checks that fail: " + ", ".join(failed))
    report["printed"] = printed
    report["ok"] = not failed
    write_atomic(args.out, json.dumps(report, indent=2, sort_keys=True, default=str) + "\n")
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
