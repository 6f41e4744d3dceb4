"""Evaluation: OpenUnlearning's own TOFU evaluator against ``remnant eval``, at equal values (docs/metrics.md).

Theirs runs the model once per metric (and again for each metric's pre-computes), tokenising each split anew
and padding batches in file order; ``remnant eval`` encodes every split once, scores the union of the sequences
all metrics read in one teacher-forced pass (deduplicated, sorted by length, the vocabulary head only on label
positions) and generates once per distinct prompt. The figure is the speed-up of the whole evaluation, model
already loaded on both sides, with every logged entry compared between the two.

Their side is their code, unmodified, from a checkout named by ``REMNANT_OPENUNLEARNING_SRC`` (its ``src/``
folder; never vendored), run by benchmarks/ou_evaluator.py in a worker process under
``REMNANT_OPENUNLEARNING_PYTHON`` (an interpreter with their evaluator's dependencies: omegaconf, hydra-core,
hydra-colorlog, datasets, scikit-learn, rouge-score, scipy; the same torch and transformers as remnant). The worker
stays up between runs, so the two sides are timed in alternation like every other benchmark here; without the
variable the benchmark says so and writes nothing.

Data: a Class D canary pack minted with perturbed answers (``remnant mint --class D --perturbed``) and exported as
a TOFU folder (``remnant packs export --format tofu``): forget10_perturbed and holdout10, 25 rows each.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from itertools import count
from pathlib import Path
from typing import IO, Any

from _common import ROOT, busy_core, compare, parser, setup, table, write_section

#: Their metric config names (configs/eval/tofu_metrics): the default TOFU suite less model_utility (it needs the
#: retain, real-authors and world-facts splits a canary pack does not have), plus the other forget-side metrics.
SUITES = {
    "teacher-forced": [
        "forget_Q_A_Prob",
        "forget_Q_A_PARA_Prob",
        "forget_Q_A_PERT_Prob",
        "forget_Truth_Ratio",
        "forget_quality",
        "extraction_strength",
        "exact_memorization",
        "mia_loss",
        "mia_zlib",
        "mia_min_k",
        "mia_min_k_plus_plus",
        "privleak",
    ],
}
SUITES["all"] = [*SUITES["teacher-forced"], "forget_Q_A_ROUGE", "mia_gradnorm"]
SUITE_TEXT = {
    "teacher-forced": "12 teacher-forced metrics",
    "all": "the 12 + forget_Q_A_ROUGE + mia_gradnorm",
}
TOLERANCE = 1e-5
#: Entries whose excess over TOLERANCE has a documented cause on their side (docs/metrics.md, "Where numbers can
#: still differ", 2): min-k++ divides by √σ²_t, and their float32 Σp(log p)² − μ² keeps few of a small σ²'s digits;
#: every entry built on their ``evaluate_probability`` (the Q_A probabilities, the truth ratio made of them, the
#: loss and zlib attacks) carries their float32 cross-entropy, whose log-softmax runs along the vocabulary as a
#: non-last dimension of a (batch, vocabulary, length) view: ~1e-4 in ``avg_loss`` on a 49,152-word vocabulary.
#: The note's float64 check shows which side carries the rounding whenever one of these is over.
CROSS_ENTROPY = "their float32 cross-entropy"
KNOWN = {
    "mia_min_k_plus_plus": "their float32 σ²_t",
    **dict.fromkeys(
        ("forget_Q_A_Prob", "forget_Q_A_PARA_Prob", "forget_Q_A_PERT_Prob", "forget_truth_ratio"),
        CROSS_ENTROPY,
    ),
    **dict.fromkeys(("mia_loss", "mia_zlib"), CROSS_ENTROPY),
    # their per-tensor float32 norm(): ~1e-4 relative on SmolLM2's 28M-entry embedding gradient (docs/metrics.md,
    # "Where numbers can still differ", 3); remnant's norms are float64
    "mia_gradnorm": "their float32 norm",
}


@dataclass(frozen=True)
class Agreement:
    """How the two logs compare: entries within tolerance, the largest difference, and what differs."""

    entries: int
    within: int
    largest: float
    rouge_identical: bool | None
    over: dict[str, float]
    problems: list[str]
    #: The largest |ours − theirs| of each logged metric (ROUGE included; inf where the two are not comparable).
    diffs: dict[str, float]


def make_data(folder: Path) -> Path:
    """A TOFU folder from a minted Class D canary pack with paraphrased and perturbed answers: what
    ``remnant mint --class D --entities 20 --controls 5 --seed 3 --perturbed`` and
    ``remnant packs export PACK --format tofu --forget forget10 --holdout holdout10`` write."""
    from remnant.formats.export import pack_to_tofu
    from remnant.packs.classd import ClassDSpec, mint_class_d

    pack = mint_class_d(ClassDSpec(entities=20, controls=5, seed=3, truth_ratio_options=True))
    return Path(pack_to_tofu(pack, folder / "tofu", forget="forget10", holdout="holdout10").out)


def tiny_model_dir(folder: Path) -> Path:
    from fixtures_models import build_tiny_model  # type: ignore[import-not-found]

    return Path(build_tiny_model("llama", folder / "tiny"))


def smollm2_dir() -> Path:
    from remnant.models import zoo

    return Path(zoo.cached("smollm2-135m-instruct") or zoo.fetch("smollm2-135m-instruct"))


def shared_pad_token(tokenizer: Any) -> str | None:
    """A pad token no sequence holds, when the model pads with its EOS (their collator masks every pad-id token)."""
    if tokenizer.pad_token_id is not None and tokenizer.pad_token_id != tokenizer.eos_token_id:
        return None
    return str(tokenizer.unk_token)


class TheirEvaluator:
    """Their TOFU evaluator in a long-lived worker (benchmarks/ou_evaluator.py); ``run()`` evaluates once."""

    def __init__(self, python: str, src: str, model: Path, data: Path, out: Path, **opts: Any) -> None:
        self.out, self._runs = out, count()
        self.log_path = out / "worker.log"
        out.mkdir(parents=True, exist_ok=True)
        argv = [python, str(Path(__file__).with_name("ou_evaluator.py")), "--src", src, "--model", str(model)]
        argv += ["--data", str(data), "--out", str(out)]
        for key, value in opts.items():
            if value is not None:
                argv += [f"--{key.replace('_', '-')}", str(value)]
        threads = str(opts.get("threads", 1))
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "OMP_NUM_THREADS": threads}
        env["HF_DATASETS_CACHE"] = str(out / "hf-datasets")
        self._log = self.log_path.open("w")
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True, env=env
        )
        self._expect("OU-READY")

    def _expect(self, prefix: str) -> str:
        stdout: IO[str] = self.proc.stdout  # type: ignore[assignment]
        for line in stdout:
            if line.startswith(prefix):
                return line[len(prefix) :].strip()
        tail = self.log_path.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"their evaluator stopped (exit {self.proc.wait()}); its stderr ends:\n{tail}")

    def run(self) -> dict[str, Any]:
        stdin: IO[str] = self.proc.stdin  # type: ignore[assignment]
        stdin.write(f"run run{next(self._runs)}\n")
        stdin.flush()
        done: dict[str, Any] = json.loads(self._expect("OU-DONE "))
        return done

    def close(self) -> None:
        if self.proc.poll() is None:
            stdin: IO[str] = self.proc.stdin  # type: ignore[assignment]
            stdin.write("quit\n")
            stdin.flush()
            self.proc.wait(timeout=60)
        self._log.close()


def remnant_runner(
    state: Any, prompt: Any, data: Path, names: list[str], out: Path, opts: dict[str, Any]
) -> Any:
    """``remnant eval``'s work once the model is loaded (commands._evaluate): read the splits, evaluate, write the
    log (the manifest sidecar, hashes already computed at load, is left out)."""
    from remnant.atomic import write_atomic
    from remnant.formats.tofu import read_tofu
    from remnant.metrics.catalogue import ALIASES
    from remnant.metrics.evallog import eval_log_json
    from remnant.metrics.evaluate import EvalSettings, evaluate, required_splits
    from remnant.metrics.rows import as_rows

    keys = list(dict.fromkeys(ALIASES.get(n, n) for n in names))
    settings = EvalSettings(batch_size=opts["batch_size"], max_new_tokens=opts["max_new_tokens"])
    splits = required_splits(keys, settings)
    runs = count()

    def run() -> dict[str, Any]:
        folder = read_tofu(data, splits)
        rows = {s: as_rows([r.model_dump() for r in folder.rows(s)], split=s) for s in splits}
        result = evaluate(state, rows.__getitem__, keys, prompt=prompt, settings=settings)
        path = out / f"remnant{next(runs)}.json"
        write_atomic(path, eval_log_json({k: v.to_json() for k, v in result.logs.items()}))
        return {"logs": str(path)}

    return run


def agreement(ours: dict[str, Any], theirs: dict[str, Any]) -> Agreement:
    """Every entry of both logs compared: numbers to TOLERANCE, texts and structure exactly, ROUGE exactly."""
    from ou_crosscheck import max_diff  # type: ignore[import-not-found]

    common = sorted(set(ours) & set(theirs))
    problems = [f"{k}: only in {'ours' if k in ours else 'theirs'}" for k in sorted(set(ours) ^ set(theirs))]
    over: dict[str, float] = {}
    diffs: dict[str, float] = {}
    within, largest, rouge = 0, 0.0, None
    for key in common:
        try:
            diff = max_diff(ours[key], theirs[key], key)
        except AssertionError as err:
            problems.append(f"{key}: differs at {err.args[0] if err.args else '?'}")
            diff = float("inf")
        diffs[key] = diff
        if "ROUGE" in key:
            rouge = (rouge is not False) and diff == 0.0
            continue
        largest = max(largest, diff)
        if diff <= TOLERANCE:
            within += 1
        else:
            over[key] = diff
    entries = sum("ROUGE" not in k for k in common)
    return Agreement(entries, within, largest, rouge, over, problems, diffs)


def float64_check(state: Any, prompt: Any, data: Path, ours: dict[str, Any], theirs: dict[str, Any]) -> str:
    """The forget_Q_A_Prob item where the two differ most, against the float64 reduction of the same logits and
    against their own reduction (``evaluate_probability``'s cross-entropy over the (batch, vocabulary, length)
    view) of those logits: where the last equals their logged value, the difference is their reduction alone."""
    import torch

    from remnant.formats.tofu import read_tofu
    from remnant.metrics.encoding import encode_qa

    def loss(log: dict[str, Any], i: str) -> float:
        return float(log["forget_Q_A_Prob"]["value_by_index"][i]["avg_loss"])

    worst = max(ours["forget_Q_A_Prob"]["value_by_index"], key=lambda i: abs(loss(ours, i) - loss(theirs, i)))
    row = read_tofu(data, ["forget10_perturbed"]).rows("forget10_perturbed")[int(worst)]
    enc = encode_qa(state.tokenizer, prompt, row.question, row.answer)
    with torch.inference_mode():
        logits = state.model(input_ids=torch.tensor([enc.full_ids])).logits[0]
    logp = torch.log_softmax(logits.double(), dim=-1)[enc.label_start - 1 : len(enc.full_ids) - 1]
    ref = -float(logp.gather(-1, torch.tensor(enc.full_ids[enc.label_start :])[:, None]).mean())
    labels = torch.tensor([[-100] * enc.label_start + list(enc.full_ids[enc.label_start :])])
    cross_entropy = torch.nn.CrossEntropyLoss(ignore_index=-100, reduction="none")
    their_sum = cross_entropy(logits[None, :-1].transpose(-1, -2), labels[:, 1:]).sum(-1)
    their_reduction = float(their_sum[0]) / (len(enc.full_ids) - enc.label_start)
    return (
        f"forget_Q_A_Prob item {worst}, mean NLL: theirs {loss(theirs, worst):.7f}, remnant "
        f"{loss(ours, worst):.7f}, float64 reduction of the same logits {ref:.7f}, their float32 "
        f"cross-entropy of the same logits {their_reduction:.7f}"
    )


def breakdown(run: Any) -> str:
    """One more remnant run under cProfile: the seconds of its model work by phase."""
    import cProfile
    import pstats

    profile = cProfile.Profile()
    start = time.perf_counter()
    profile.runcall(run)
    total = time.perf_counter() - start
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    phases = {
        "teacher_forced_pass": "one teacher-forced pass",
        "greedy_generations": "generations",
        "gradnorm_pass": "gradient norms (their forward also reads the attacks' sequences)",
    }
    found = {name: 0.0 for name in phases}
    for (_file, _line, func), (_cc, _nc, _tt, cumulative, _callers) in stats.items():
        if func in found:
            found[func] += cumulative
    parts = [f"{phases[k]} {v:.1f} s" for k, v in found.items() if v > 0]
    rest = total - sum(found.values())
    return f"remnant's time by phase (one profiled run, {total:.1f} s): {', '.join(parts)}, the rest {rest:.1f} s"


def measure(
    label: str, model_dir: Path, data: Path, suite: str, args: Any, work: Path, ou: tuple[str, str]
) -> tuple[list[str], str, dict[str, float]]:
    """One table row, a note and each metric's largest difference for ``suite`` on the model in ``model_dir``."""
    from remnant.metrics.encoding import OpenUnlearningPrompt
    from remnant.models.load import load_model

    opts: dict[str, Any] = {"batch_size": args.batch_size, "max_new_tokens": args.max_new_tokens}
    out = work / f"{label.split()[0]}-{suite}"
    out.mkdir(parents=True)
    state = load_model(str(model_dir))
    opts["pad_token"] = shared_pad_token(state.tokenizer)
    if opts["pad_token"] is not None:
        state.tokenizer.pad_token = opts["pad_token"]
    prompt = OpenUnlearningPrompt.for_tokenizer(state.tokenizer)
    ours = remnant_runner(state, prompt, data, SUITES[suite], out, opts)
    template = {k: v for k, v in asdict(prompt).items() if k not in ("name", "max_length")}
    theirs = TheirEvaluator(
        ou[0],
        ou[1],
        model_dir,
        data,
        out / "ou",
        metrics=",".join(SUITES[suite]),
        template_args=json.dumps(template),
        threads=args.threads,
        **opts,
    )
    try:
        timing = compare(ours, theirs.run, repeats=args.repeats)
    finally:
        theirs.close()
    ours_log = json.loads(Path(timing.fast_result["logs"]).read_text())
    their_log = json.loads(Path(timing.base_result["logs"]).read_text())
    agree = agreement(ours_log, their_log)
    for problem in agree.problems:
        print(f"{label} {suite}: {problem}", file=sys.stderr)
    rouge = "—" if agree.rouge_identical is None else ("identical" if agree.rouge_identical else "**differ**")
    over = ", ".join(
        f"{k} {v:.1e} ({KNOWN.get(k, '**unexplained**')})" for k, v in sorted(agree.over.items())
    )
    note = f"{label}, {SUITE_TEXT[suite]}: over {TOLERANCE:g}: {over or 'none'}"
    if agree.problems:
        note += f"; not comparable: {'; '.join(agree.problems)}"
    if set(agree.over) - {"mia_min_k_plus_plus"}:
        note += f"; {float64_check(state, prompt, data, ours_log, their_log)}"
    note += f"; {breakdown(ours)}"
    row = [
        label,
        SUITE_TEXT[suite],
        f"{timing.base:.2f} s",
        f"{timing.fast:.2f} s",
        f"**{timing.speedup:.1f}×**",
        f"{agree.within}/{agree.entries}",
        f"{agree.largest:.1e}",
        rouge,
    ]
    return row, note, agree.diffs


def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--batch-size", type=int, default=32, help="batch size on both sides (theirs: 32)")
    p.add_argument("--max-new-tokens", type=int, default=200, help="ROUGE generation length (theirs: 200)")
    p.add_argument("--suite", choices=(*SUITES, "both"), default="both")
    p.add_argument(
        "--busy", action="store_true", help="run beside a process that keeps one core busy (its own section)"
    )
    args = p.parse_args()
    src = os.environ.get("REMNANT_OPENUNLEARNING_SRC")
    python = os.environ.get("REMNANT_OPENUNLEARNING_PYTHON", sys.executable)
    if not src:
        print("bench_eval: REMNANT_OPENUNLEARNING_SRC (their src/ folder) is not set; nothing measured")
        return
    sys.path.insert(0, str(ROOT / "tests" / "unit" / "metrics"))
    setup(args)
    suites = list(SUITES) if args.suite == "both" else [args.suite]
    rows: list[list[str]] = []
    notes_: list[str] = []
    diffs: dict[str, dict[str, float]] = {}
    with (
        tempfile.TemporaryDirectory(prefix="bench-eval-") as tmp,
        busy_core() if args.busy else nullcontext(),
    ):
        work = Path(tmp)
        data = make_data(work)
        targets = [("tiny Llama (2 layers, hidden 64)", tiny_model_dir(work))]
        if args.smollm2:
            targets.append(("SmolLM2-135M-Instruct (30 layers, fp32)", smollm2_dir()))
        for label, model_dir in targets:
            for suite in suites:
                row, note, found = measure(label, model_dir, data, suite, args, work, (python, src))
                rows.append(row)
                notes_.append(note)
                for metric, diff in found.items():
                    diffs.setdefault(metric, {})[label] = max(diff, diffs.get(metric, {}).get(label, 0.0))
    header = [
        "model",
        "metrics",
        "OpenUnlearning evaluator",
        "remnant eval",
        "speed-up",
        f"entries within {TOLERANCE:g}",
        "largest difference",
        "ROUGE entries",
    ]
    body = table(header, rows)
    body += "\n\nThe largest |remnant − theirs| of each logged metric (per-item values and aggregate; both suites):\n\n"
    body += per_metric_table(diffs, [label for label, _ in targets])
    body += notes(args) + "\n\n" + "\n".join(f"- {n}" for n in notes_)
    name, title = "eval", "Evaluation: OpenUnlearning's evaluator vs `remnant eval`"
    if args.busy:
        name, title = "eval-busy", title + ", beside a busy core"
        body = (
            "The same benchmark (`--busy`) while another process keeps one of the two cores busy with float32 "
            "matrix products (benchmarks/_common.py `busy_core`).\n\n" + body
        )
    write_section(name, title, body, write=not args.no_write)


def per_metric_table(diffs: dict[str, dict[str, float]], labels: list[str]) -> str:
    """Metrics down, models across; an entry over TOLERANCE is marked with its cause."""

    def cell(metric: str, label: str) -> str:
        diff = diffs[metric].get(label)
        if diff is None:
            return "—"
        text = f"{diff:.1e}"
        return text if diff <= TOLERANCE or "ROUGE" in metric else f"{text} ({KNOWN.get(metric, '**?**')})"

    rows = [[f"`{m}`", *(cell(m, label) for label in labels)] for m in sorted(diffs)]
    return table(["metric", *(label.split(" (")[0] for label in labels)], rows)


def notes(args: Any) -> str:
    smol = " --smollm2" if args.smollm2 else ""
    return (
        f"\n\nBatch size {args.batch_size} on both sides, greedy ROUGE generations of up to {args.max_new_tokens} "
        f"new tokens, fp32, torch threads {args.threads}, the model loaded beforehand on both sides; median of "
        f"{args.repeats} alternated runs (their evaluator stays up in a worker process between runs). Data: a "
        "minted Class D canary pack exported as TOFU (forget10_perturbed and holdout10, 25 rows each, 5 perturbed "
        f"answers per forget row). Their code at {their_commit()} runs unmodified (benchmarks/ou_evaluator.py: "
        "their hydra configs with the datasets pointed at the local folder, their TOFUEvaluator), with "
        "transformers 4.x's chat-template return and BPE clean-up restored on the tokenizer given to it; where a "
        "model pads with its EOS (SmolLM2), both sides get the unknown token as pad, since their collator masks "
        "every pad-id token inside the sequences. Every entry of both logs, per-item values and stored texts "
        "included, is compared; ROUGE entries must be identical. Where an entry other than min-k++ differs by "
        f"more than {TOLERANCE:g}, the note puts the worst forget_Q_A_Prob item beside a float64 reduction and "
        "beside their own cross-entropy of the same logits (one sequence, no padding), to show which side "
        "carries the rounding. remnant shares one teacher-forced pass across the "
        "metrics, runs each question's prompt and its answers' common start once for all its answers "
        "(paraphrased and perturbed), generates once per prompt, drops a row from the batch once it has ended "
        "(their `generate` carries every row until the batch's longest answer ends) and, once few rows are left, "
        "verifies up to 10 tokens guessed from each row's own earlier text per step (prompt lookup; exact greedy "
        "decoding, the texts are compared above), and takes a batch's gradient norms from one forward and one "
        "backward through the activations, each parameter's per-sample norm assembled from its module's inputs "
        "and output gradients (theirs: one full backward per sample); that forward's logits also give the "
        "attacks' teacher-forced readings of the same sequences, which the scoring pass then skips. remnant's "
        "time by phase is in the notes below. Reproduce: `REMNANT_OPENUNLEARNING_SRC=$OU/src "
        "REMNANT_OPENUNLEARNING_PYTHON=$VENV/bin/python .venv/bin/python benchmarks/bench_eval.py"
        f"{smol}{' --busy' if args.busy else ''}{'' if args.suite == 'both' else ' --suite ' + args.suite}"
        f" --repeats {args.repeats}`, where `$OU` is a checkout of "
        "locuslab/open-unlearning and `$VENV` an "
        "interpreter with omegaconf, hydra-core, hydra-colorlog, datasets and scikit-learn beside remnant's torch "
        "and transformers (here: `python -m venv $VENV`, a `.pth` file naming `.venv`'s site-packages, then "
        "`$VENV/bin/pip install omegaconf hydra-core hydra-colorlog datasets scikit-learn`)."
    )


def their_commit() -> str:
    src = os.environ.get("REMNANT_OPENUNLEARNING_SRC", "")
    try:
        done = subprocess.run(
            ["git", "-C", src, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        )
        return f"`{done.stdout.strip()}`"
    except (OSError, subprocess.CalledProcessError):
        return "an unrecorded commit"


if __name__ == "__main__":
    main()
