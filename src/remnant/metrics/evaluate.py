"""Run named metrics on one model (docs/metrics.md, "One pass, shared": theirs re-runs the model per metric): every
split encoded once, one teacher-forced pass over the deduplicated union of the sequences the metrics read, one
greedy generation per distinct prompt (and generation length and stop strings), then each metric as a small pure
function over those readings, dependencies first. ``EvalSettings.suite`` picks the TOFU or MUSE catalogue
(:mod:`remnant.metrics.catalogue`).

Without a retain model's log, forget quality is ``None`` and privleak uses a retain AUC of 0.5, each with a note,
as theirs do; ``mia_reference`` is refused without a reference model."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from remnant import registry
from remnant.engine.measurement import ModelLike
from remnant.errors import ConfigError
from remnant.metrics.base import MODEL_READS, Metric, Readings, Reads, RetainLog, reads_of
from remnant.metrics.catalogue import MetricDef, ResolvedSource, Suite, with_dependencies
from remnant.metrics.encoding import (
    EncodedQA,
    OpenUnlearningPrompt,
    PromptSetting,
    encode_completion,
    encode_openunlearning,
    encode_qa,
)
from remnant.metrics.evallog import MetricLog
from remnant.metrics.rouge import GenerationRecord
from remnant.metrics.rows import answers_of, as_row, completion_of, question_of
from remnant.metrics.scores import TokenScores
from remnant.metrics.text import decode, tokenizer_cleans_up
from remnant.registry import ComponentSpec

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from remnant.metrics.forward import ScoredSequence


@dataclass(frozen=True)
class EvalSettings:
    """OpenUnlearning's ``eval.tofu`` globals (forget and holdout splits, question field: TOFU only), the suite and
    run sizes. ``max_new_tokens`` ``None`` gives each ROUGE metric its configured length (TOFU 200, MUSE knowmem
    32, verbmem 128); a number overrides every one."""

    forget_split: str = "forget10"
    holdout_split: str = "holdout10"
    question_key: str = "question"
    batch_size: int = 32
    max_new_tokens: int | None = None
    progress: bool = False
    suite: Suite = "tofu"


@dataclass(frozen=True)
class EvalResult:
    """Every computed metric (requested and dependencies), its component spec, its items' sources, and notes."""

    logs: dict[str, MetricLog]
    specs: dict[str, ComponentSpec]
    sources: dict[str, dict[str, dict[str, object]]]
    notes: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, float | None]:
        """``{metric: agg_value}`` (their ``TOFU_SUMMARY.json``)."""
        return {name: self.logs[name].agg_value for name in sorted(self.logs)}


#: A split's rows by name: QARows, mappings or objects with the fields (TOFU), MUSE rows as mappings.
RowsOf = Callable[[str], Sequence[Any]]


def _sides(defn: MetricDef) -> dict[str, Any]:
    if defn.holdout is not None:
        return {"forget": defn.source, "holdout": defn.holdout}
    return {"items": defn.source} if defn.source is not None else {}


def split_readers(names: Sequence[str], settings: EvalSettings) -> dict[str, list[str]]:
    """Every split the metrics (with their dependencies) read, in-context example splits included, sorted, each
    with the names of the metrics that read it."""
    s = settings
    readers: dict[str, list[str]] = {}
    for defn in with_dependencies(list(names), s.suite):
        for src in _sides(defn).values():
            for split in src.resolve(s.forget_split, s.holdout_split, s.question_key).splits:
                users = readers.setdefault(split, [])
                if defn.name not in users:
                    users.append(defn.name)
    return dict(sorted(readers.items()))


def required_splits(names: Sequence[str], settings: EvalSettings) -> list[str]:
    """Every split the metrics (with their dependencies) read, sorted."""
    return list(split_readers(names, settings))


class _Run:
    """One evaluation's state: encodings, bank keys per metric side, readings, and the logs so far."""

    def __init__(
        self, target: ModelLike, rows_of: RowsOf, prompt: PromptSetting, settings: EvalSettings
    ) -> None:
        self.target, self.rows_of, self.prompt, self.settings = target, rows_of, prompt, settings
        self.sequences: list[EncodedQA] = []  # the bank: a bank key is an index here
        self._index: dict[tuple[tuple[int, ...], int], int] = {}
        self._encoded: dict[ResolvedSource, list[list[EncodedQA]]] = {}
        self.keys: dict[tuple[str, str], list[list[int]]] = {}
        self.resolved: dict[tuple[str, str], ResolvedSource] = {}

    def encode(self, src: ResolvedSource) -> list[list[EncodedQA]]:
        if src not in self._encoded:
            rows = self.rows_of(src.split)
            if not rows:
                raise ConfigError(f"split {src.split!r} has no rows", requirement="R2")
            if src.encoding == "completion":
                self._encoded[src] = [[self._completion(src, row, i)] for i, row in enumerate(rows)]
            else:
                shots = self._shots(src)
                self._encoded[src] = [self._qa(src, row, i, shots) for i, row in enumerate(rows)]
        return self._encoded[src]

    def _completion(self, src: ResolvedSource, row: object, index: int) -> EncodedQA:
        """Their ``preprocess_pretraining_instance`` of one row (MUSE verbmem and membership sets)."""
        prefix, text = completion_of(row, src.question_key, src.answer_key, split=src.split, index=index)
        tok = self.target.tokenizer
        return encode_completion(tok, prefix, text, max_length=src.max_length, insert_space=src.insert_space)

    def _shots(self, src: ResolvedSource) -> tuple[list[str], list[str]]:
        """The in-context examples every item of ``src`` is asked after: all rows of its few-shot split, in order,
        read with the item's own question and answer fields (their ``QADataset.fs_data``)."""
        if src.few_shot is None:
            return [], []
        if not isinstance(self.prompt, OpenUnlearningPrompt):
            raise ConfigError(
                f"split {src.split!r} is asked after the in-context examples of {src.few_shot!r}, which only "
                "OpenUnlearning's prompt format lays out (--prompt openunlearning)",
                requirement="R23",
            )
        rows = [as_row(r, split=src.few_shot, index=i) for i, r in enumerate(self.rows_of(src.few_shot))]
        questions = [
            question_of(r, src.question_key, split=src.few_shot, index=i) for i, r in enumerate(rows)
        ]
        answers = [answers_of(r, src.answer_key, split=src.few_shot, index=i) for i, r in enumerate(rows)]
        if any(isinstance(a, tuple) for a in answers):
            raise ConfigError(
                f"split {src.few_shot!r}: an in-context example takes one answer; field {src.answer_key!r} "
                "holds several",
                requirement="R2",
            )
        return questions, [str(a) for a in answers]

    def _qa(
        self, src: ResolvedSource, source: object, index: int, shots: tuple[list[str], list[str]]
    ) -> list[EncodedQA]:
        """Every answer of one row as a question/answer pair, after the in-context examples ``shots``."""
        row = as_row(source, split=src.split, index=index)
        question = question_of(row, src.question_key, split=src.split, index=index)
        answers = answers_of(row, src.answer_key, split=src.split, index=index)
        listed = list(answers) if isinstance(answers, tuple) else [answers]
        tok = self.target.tokenizer
        if src.few_shot is None or not isinstance(self.prompt, OpenUnlearningPrompt):
            return [encode_qa(tok, self.prompt, question, a) for a in listed]
        qs, ans = shots
        return [encode_openunlearning(tok, self.prompt, [*qs, question], [*ans, a]) for a in listed]

    def add(self, enc: EncodedQA) -> int:
        """``enc``'s bank key: distinct (ids, first label) sequences, so one several metrics read is scored once."""
        key = self._index.setdefault((enc.full_ids, enc.label_start), len(self.sequences))
        if key == len(self.sequences):
            self.sequences.append(enc)
        return key

    def plan(self, defs: Sequence[MetricDef]) -> None:
        s = self.settings
        for defn in defs:
            for side, source in _sides(defn).items():
                src = source.resolve(s.forget_split, s.holdout_split, s.question_key)
                self.resolved[(defn.name, side)] = src
                self.keys[(defn.name, side)] = [[self.add(e) for e in item] for item in self.encode(src)]

    def keys_of(self, readers: Sequence[str]) -> list[int]:
        """The bank keys of every item the metrics ``readers`` read."""
        wanted = {
            k for (name, _), items in self.keys.items() if name in readers for item in items for k in item
        }
        return sorted(wanted)


#: Every computed metric's declared readings, by metric name.
Declared = Mapping[str, frozenset[Reads]]


def _readers(declared: Declared, reading: Reads) -> list[str]:
    return [name for name, reads in declared.items() if reading in reads]


def _check_declarations(defs: Sequence[MetricDef], declared: Declared) -> None:
    """A named metric gives its metric what it declares: items for a model reading, ``pre_compute`` only to a
    metric that reads dependencies (R23: never a silent empty reading)."""
    for d in defs:
        reads = declared[d.name]
        if reads & MODEL_READS and not _sides(d):
            raise ConfigError(
                f"metric {d.name!r} ({d.handler}) reads a model pass but names no split", requirement="R23"
            )
        if d.pre_compute and Reads.DEPENDENCIES not in reads:
            raise ConfigError(
                f"metric {d.name!r}: its pre_compute is unused, as {d.handler} does not declare Reads.DEPENDENCIES",
                requirement="R23",
            )


def _check_reference(declared: Declared, target: ModelLike, reference: ModelLike | None) -> None:
    readers = _readers(declared, Reads.REFERENCE_PASS)
    if not readers:
        return
    if reference is None:
        raise ConfigError(
            f"metric {readers[0]!r} needs a reference model (--reference MODEL)", requirement="R23"
        )
    if reference.tokenizer.get_vocab() != target.tokenizer.get_vocab():
        raise ConfigError(
            f"metric {readers[0]!r}: the reference model's tokenizer differs from the evaluated model's; the "
            "reference attack scores the same token ids under both models",
            requirement="R23",
        )


def _sequences(run: _Run, keys: Sequence[int], tok: Any) -> tuple[list[ScoredSequence], int]:
    """The bank's sequences of ``keys`` as a pass scores them, and ``tok``'s pad id (its EOS, else 0, if none)."""
    from remnant.metrics.forward import ScoredSequence

    pad = tok.pad_token_id if tok.pad_token_id is not None else (tok.eos_token_id or 0)
    seqs = [ScoredSequence(run.sequences[k].full_ids, max(1, run.sequences[k].label_start)) for k in keys]
    return seqs, int(pad)


def _pass(
    model_like: ModelLike, run: _Run, keys: list[int], *, stats_keys: set[int], desc: str
) -> dict[int, TokenScores]:
    from remnant.metrics.forward import teacher_forced_pass

    seqs, pad = _sequences(run, keys, model_like.tokenizer)
    scores = teacher_forced_pass(
        model_like.model,
        seqs,
        batch_size=run.settings.batch_size,
        vocab_stats=[k in stats_keys for k in keys],
        pad_id=pad,
        progress=run.settings.progress,
        desc=desc,
    )
    return dict(zip(keys, scores, strict=True))


#: How a ROUGE metric generates: the new-token budget and the stop strings (one generation per prompt under each).
GenerationKey = tuple[int, tuple[str, ...]]


def effective_params(defn: MetricDef, settings: EvalSettings) -> dict[str, object]:
    """The metric's parameters as run: a ROUGE metric's generation length is the one its generations were made
    with (a ``--max-new-tokens`` override, else its config's), so the manifest records it (R23)."""
    params = dict(defn.params)
    if Reads.GENERATIONS in reads_of(registry.get("metric", defn.handler)):
        params["max_new_tokens"] = _generation_key(defn, settings)[0]
    return params


def _generation_key(defn: MetricDef, settings: EvalSettings) -> GenerationKey:
    """The metric's generation length (its config's unless the settings override it) and stop strings."""
    length = settings.max_new_tokens
    if length is None:
        length = int(defn.params.get("max_new_tokens", 200))
    return length, tuple(defn.params.get("stopwords", ()))


def _record(
    tok: PreTrainedTokenizerBase, src: ResolvedSource, enc: EncodedQA, generation: str
) -> GenerationRecord:
    """The ground truth recovered as their ``eval_text_similarity`` does: the decoded labels minus the decoded
    prompt (``str.replace``), stripped. A question's labels are the whole conversation (their
    ``predict_with_generate``); a completion's are the tokens past the prefix."""
    prompt_text = decode(tok, enc.prompt_ids, skip_special_tokens=True, clean_up=True)
    labelled = enc.full_ids[enc.label_start :] if src.encoding == "completion" else enc.full_ids
    full_text = decode(tok, labelled, skip_special_tokens=True, clean_up=True)
    truth = full_text.replace(prompt_text, "").strip()
    return GenerationRecord(input=prompt_text, ground_truth=truth, generation=generation)


def _generations(
    run: _Run, defs: Sequence[MetricDef], declared: Declared
) -> dict[tuple[str, str], list[list[GenerationRecord]]]:
    """Greedy generations for every metric that declares them, by (metric, side): one per distinct prompt and
    generation key, shared by all its ground truths."""
    from remnant.metrics.generation import greedy_generations

    readers = _readers(declared, Reads.GENERATIONS)
    sides = [(d, side) for d in defs if d.name in readers for side in _sides(d)]
    groups: dict[GenerationKey, dict[tuple[int, ...], int]] = {}
    for d, side in sides:
        prompts = groups.setdefault(_generation_key(d, run.settings), {})
        for item in run.encode(run.resolved[(d.name, side)]):
            for enc in item:
                prompts.setdefault(enc.prompt_ids, len(prompts))
    texts = {
        key: greedy_generations(
            run.target.model,
            run.target.tokenizer,
            list(prompts),
            batch_size=run.settings.batch_size,
            max_new_tokens=key[0],
            stopwords=key[1],
            progress=run.settings.progress,
        )
        for key, prompts in groups.items()
    }
    out = {}
    for d, side in sides:
        key, src = _generation_key(d, run.settings), run.resolved[(d.name, side)]
        out[(d.name, side)] = [
            [_record(run.target.tokenizer, src, e, texts[key][groups[key][e.prompt_ids]]) for e in item]
            for item in run.encode(src)
        ]
    return out


def _gradnorms(
    run: _Run, metrics: Mapping[str, Metric], declared: Declared, stats_keys: set[int]
) -> tuple[dict[int, float], dict[int, TokenScores]]:
    """Gradient-norm scores by bank key, and the teacher-forced readings its forward gave for the same keys (the
    scoring pass then skips them: one forward serves both)."""
    from remnant.metrics.gradnorm import gradnorm_pass

    readers = _readers(declared, Reads.GRADIENT_NORMS)
    keys = run.keys_of(readers)
    if not keys:
        return {}, {}
    p = metrics[readers[0]].gradient_p  # one backward pass per sequence: the first reader's p (one per suite)
    seqs, pad = _sequences(run, keys, run.target.tokenizer)
    scores, readings = gradnorm_pass(
        run.target.model,
        seqs,
        p=float(p),
        batch_size=run.settings.batch_size,
        pad_id=pad,
        vocab_stats=[k in stats_keys for k in keys],
        progress=run.settings.progress,
    )
    return dict(zip(keys, scores, strict=True)), {keys[i]: r for i, r in readings.items()}


@dataclass(frozen=True)
class _Passes:
    """What the model passes produced: token scores and gradient norms by bank key, generations by metric side."""

    target: dict[int, TokenScores]
    reference: dict[int, TokenScores]
    gradnorm: dict[int, float]
    generations: dict[tuple[str, str], list[list[GenerationRecord]]]


def _run_passes(
    run: _Run, defs: Sequence[MetricDef], metrics: Mapping[str, Metric], reference: ModelLike | None
) -> _Passes:
    """Only the passes some metric declared: one teacher-forced pass shared by all its readers (μ_t, σ²_t only
    where ``VOCAB_STATS`` is read), the reference pass, generations and gradient norms."""
    declared = {name: reads_of(type(m)) for name, m in metrics.items()}
    stats_keys = set(run.keys_of(_readers(declared, Reads.VOCAB_STATS)))
    gradnorm, scored = _gradnorms(run, metrics, declared, stats_keys)
    to_score = [k for k in run.keys_of(_readers(declared, Reads.TEACHER_FORCED)) if k not in scored]
    ref_keys = run.keys_of(_readers(declared, Reads.REFERENCE_PASS))
    return _Passes(
        target={**scored, **_pass(run.target, run, to_score, stats_keys=stats_keys, desc="scoring")},
        reference=(
            _pass(reference, run, ref_keys, stats_keys=set(), desc="reference")
            if reference is not None and ref_keys
            else {}
        ),
        gradnorm=gradnorm,
        generations=_generations(run, defs, declared),
    )


def _readings(
    defn: MetricDef,
    reads: frozenset[Reads],
    run: _Run,
    passes: _Passes,
    logs: Mapping[str, MetricLog],
    retain: RetainLog | None,
) -> Readings:
    """What ``defn``'s metric declared, by side; nothing it did not declare."""
    sides = list(_sides(defn))
    keys = {side: run.keys[(defn.name, side)] for side in sides}

    def tokens(by_key: dict[int, TokenScores], reading: Reads) -> dict[str, list[list[TokenScores]]]:
        if reading not in reads:
            return {}
        return {side: [[by_key[k] for k in item] for item in keys[side]] for side in sides}

    tok = run.target.tokenizer
    clean = tokenizer_cleans_up(tok)
    return Readings(
        metric=defn.name,
        sources={side: run.resolved[(defn.name, side)] for side in sides},
        scores=tokens(passes.target, Reads.TEACHER_FORCED),
        reference=tokens(passes.reference, Reads.REFERENCE_PASS),
        generations={
            side: passes.generations[(defn.name, side)]
            for side in sides
            if (defn.name, side) in passes.generations
        },
        gradient_norms=(
            {side: [passes.gradnorm[item[0]] for item in keys[side]] for side in sides}
            if Reads.GRADIENT_NORMS in reads
            else {}
        ),
        dependencies={access: logs[dep] for dep, access in defn.pre_compute}
        if Reads.DEPENDENCIES in reads
        else {},
        retain=retain if Reads.RETAIN_LOG in reads else None,
        retain_key=defn.retain_key,
        decode=lambda ids: decode(tok, list(ids), skip_special_tokens=True, clean_up=clean),
    )


def _compute(defn: MetricDef, metric: Metric, readings: Readings, notes: list[str]) -> MetricLog:
    """``metric.compute``; a metric that returns nothing, or a null value with no note saying why, is an error
    naming it (R23: a log never shows ``null`` as if it were a value)."""
    log = metric.compute(readings)
    said = metric.notes(readings)
    if not isinstance(log, MetricLog):
        raise ConfigError(
            f"metric {defn.name!r} ({defn.handler}): compute returned {type(log).__name__}, not a MetricLog",
            requirement="R23",
        )
    if log.agg_value is None and not log.value_by_index and not said:
        raise ConfigError(
            f"metric {defn.name!r} ({defn.handler}): compute returned no value and no per-item values",
            requirement="R23",
        )
    notes.extend(said)
    return log


def evaluate(
    target: ModelLike,
    rows_of: RowsOf,
    names: Sequence[str],
    *,
    prompt: PromptSetting,
    settings: EvalSettings | None = None,
    retain_log: RetainLog | None = None,
    reference: ModelLike | None = None,
) -> EvalResult:
    """Compute ``names`` (and their dependencies) on ``target``; see the module docstring."""
    settings = settings or EvalSettings()
    if settings.batch_size < 1 or (settings.max_new_tokens is not None and settings.max_new_tokens < 1):
        raise ConfigError("batch size and max new tokens must be at least 1", requirement="R23")
    defs = with_dependencies(list(names), settings.suite)
    metrics: dict[str, Metric] = {
        d.name: registry.create("metric", d.handler, effective_params(d, settings)) for d in defs
    }
    declared = {name: reads_of(type(m)) for name, m in metrics.items()}
    _check_declarations(defs, declared)
    _check_reference(declared, target, reference)
    run = _Run(target, rows_of, prompt, settings)
    run.plan(defs)
    passes = _run_passes(run, defs, metrics, reference)
    notes: list[str] = []
    logs: dict[str, MetricLog] = {}
    for d in defs:
        readings = _readings(d, declared[d.name], run, passes, logs, retain_log)
        logs[d.name] = _compute(d, metrics[d.name], readings, notes)
    sources = {
        d.name: {side: run.resolved[(d.name, side)].to_dict() for side in _sides(d)}
        for d in defs
        if _sides(d)
    }
    specs = {n: m.spec for n, m in metrics.items()}  # type: ignore[attr-defined]  # registry.create attaches it
    return EvalResult(logs=logs, specs=specs, sources=sources, notes=notes)


__all__ = [
    "EvalResult",
    "EvalSettings",
    "effective_params",
    "ModelLike",
    "RetainLog",
    "RowsOf",
    "evaluate",
    "required_splits",
    "split_readers",
]
