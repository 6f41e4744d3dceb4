"""Run named metrics on one model: encode every split once, one teacher-forced pass over the union of the
sequences the metrics need (deduplicated), one greedy generation per distinct prompt (and generation length and
stop strings), then each metric as a small pure function over those readings, dependencies first
(docs/metrics.md: theirs re-runs the model per metric).

The suite (``EvalSettings.suite``) picks the catalogue: TOFU's question/answer splits, or MUSE's knowmem questions
with in-context examples and its verbmem and privleak completions (:mod:`remnant.metrics.catalogue`).

A retain model's log (their ``TOFU_EVAL.json`` layout) feeds forget quality and privleak; without it forget quality
is ``None`` and privleak uses a retain AUC of 0.5, each with a note, as theirs do. ``mia_reference`` needs a
reference model and is refused without one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from remnant import registry
from remnant.errors import ConfigError
from remnant.metrics import mia
from remnant.metrics.catalogue import MetricDef, ResolvedSource, Suite, with_dependencies
from remnant.metrics.encoding import (
    EncodedQA,
    OpenUnlearningPrompt,
    PromptSetting,
    encode_completion,
    encode_openunlearning,
    encode_qa,
)
from remnant.metrics.evallog import MetricLog, aggregate, per_item_scores
from remnant.metrics.rouge import GenerationRecord
from remnant.metrics.rows import answers_of, as_row, completion_of, question_of
from remnant.metrics.scores import TokenScores
from remnant.metrics.text import decode, tokenizer_cleans_up
from remnant.registry import ComponentSpec

#: Handlers whose items are read off the shared teacher-forced pass of the evaluated model.
TEACHER_FORCED = frozenset(
    {
        "probability",
        "extraction_strength",
        "exact_memorization",
        "mia_loss",
        "mia_zlib",
        "mia_min_k",
        "mia_min_k_plus_plus",
        "mia_reference",
    }
)


class ModelLike(Protocol):
    """A loaded model and its tokenizer (a :class:`remnant.models.load.ModelState` is one)."""

    @property
    def model(self) -> Any: ...

    @property
    def tokenizer(self) -> Any: ...


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
class RetainLog:
    """A retain model's evaluation log and where it came from (for messages)."""

    data: Mapping[str, Any]
    source: str


@dataclass(frozen=True)
class EvalResult:
    """Every computed metric (requested and dependencies), its component spec, its items' sources, and notes."""

    logs: dict[str, MetricLog]
    specs: dict[str, ComponentSpec]
    sources: dict[str, dict[str, dict[str, str]]]
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


class _Bank:
    """Distinct (ids, first label) sequences, so a sequence several metrics read is scored once."""

    def __init__(self) -> None:
        self.sequences: list[EncodedQA] = []
        self._index: dict[tuple[tuple[int, ...], int], int] = {}

    def add(self, enc: EncodedQA) -> int:
        key = (enc.full_ids, enc.label_start)
        if key not in self._index:
            self._index[key] = len(self.sequences)
            self.sequences.append(enc)
        return self._index[key]


class _Run:
    """One evaluation's state: encodings, bank keys per metric side, readings, and the logs so far."""

    def __init__(
        self, target: ModelLike, rows_of: RowsOf, prompt: PromptSetting, settings: EvalSettings
    ) -> None:
        self.target, self.rows_of, self.prompt, self.settings = target, rows_of, prompt, settings
        self.bank = _Bank()
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

    def _completion(self, src: ResolvedSource, row: Any, index: int) -> EncodedQA:
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
        self, src: ResolvedSource, source: Any, index: int, shots: tuple[list[str], list[str]]
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

    def plan(self, defs: Sequence[MetricDef]) -> None:
        s = self.settings
        for defn in defs:
            for side, source in _sides(defn).items():
                src = source.resolve(s.forget_split, s.holdout_split, s.question_key)
                self.resolved[(defn.name, side)] = src
                self.keys[(defn.name, side)] = [[self.bank.add(e) for e in item] for item in self.encode(src)]

    def keys_of(self, defs: Sequence[MetricDef], handlers: set[str] | frozenset[str]) -> list[int]:
        wanted = {
            k
            for (name, _), items in self.keys.items()
            if _handler(defs, name) in handlers
            for item in items
            for k in item
        }
        return sorted(wanted)


def _handler(defs: Sequence[MetricDef], name: str) -> str:
    return next(d.handler for d in defs if d.name == name)


def _check_reference(defs: Sequence[MetricDef], target: ModelLike, reference: ModelLike | None) -> None:
    if not any(d.handler == "mia_reference" for d in defs):
        return
    if reference is None:
        raise ConfigError(
            "metric 'mia_reference' needs a reference model (--reference MODEL)", requirement="R23"
        )
    if reference.tokenizer.get_vocab() != target.tokenizer.get_vocab():
        raise ConfigError(
            "metric 'mia_reference': the reference model's tokenizer differs from the evaluated model's; the "
            "reference attack scores the same token ids under both models",
            requirement="R23",
        )


def _pass(
    model_like: ModelLike, run: _Run, keys: list[int], *, stats_keys: set[int], desc: str
) -> dict[int, TokenScores]:
    from remnant.metrics.forward import ScoredSequence, teacher_forced_pass

    tok = model_like.tokenizer
    pad = tok.pad_token_id if tok.pad_token_id is not None else (tok.eos_token_id or 0)
    seqs = [
        ScoredSequence(run.bank.sequences[k].full_ids, max(1, run.bank.sequences[k].label_start))
        for k in keys
    ]
    scores = teacher_forced_pass(
        model_like.model,
        seqs,
        batch_size=run.settings.batch_size,
        vocab_stats=[k in stats_keys for k in keys],
        pad_id=int(pad),
        progress=run.settings.progress,
        desc=desc,
    )
    return dict(zip(keys, scores, strict=True))


#: How a ROUGE metric generates: the new-token budget and the stop strings (one generation per prompt under each).
GenerationKey = tuple[int, tuple[str, ...]]


def effective_params(defn: MetricDef, settings: EvalSettings) -> dict[str, Any]:
    """The metric's parameters as run: a ROUGE metric's generation length is the one its generations were made
    with (a ``--max-new-tokens`` override, else its config's), so the manifest records it (R23)."""
    params = dict(defn.params)
    if defn.handler == "rouge":
        params["max_new_tokens"] = _generation_key(defn, settings)[0]
    return params


def _generation_key(defn: MetricDef, settings: EvalSettings) -> GenerationKey:
    """The metric's generation length (its config's unless the settings override it) and stop strings."""
    length = settings.max_new_tokens
    if length is None:
        length = int(defn.params.get("max_new_tokens", 200))
    return length, tuple(defn.params.get("stopwords", ()))


def _record(tok: Any, src: ResolvedSource, enc: EncodedQA, generation: str) -> GenerationRecord:
    """The ground truth recovered as their ``eval_text_similarity`` does: the decoded labels minus the decoded
    prompt (``str.replace``), stripped. A question's labels are the whole conversation (their
    ``predict_with_generate``); a completion's are the tokens past the prefix."""
    prompt_text = decode(tok, enc.prompt_ids, skip_special_tokens=True, clean_up=True)
    labelled = enc.full_ids[enc.label_start :] if src.encoding == "completion" else enc.full_ids
    full_text = decode(tok, labelled, skip_special_tokens=True, clean_up=True)
    truth = full_text.replace(prompt_text, "").strip()
    return GenerationRecord(input=prompt_text, ground_truth=truth, generation=generation)


def _generations(run: _Run, defs: Sequence[MetricDef]) -> dict[str, list[list[GenerationRecord]]]:
    """Greedy generations for every ROUGE metric: one per distinct prompt and generation key, shared by all its
    ground truths."""
    from remnant.metrics.generation import greedy_generations

    rouge_defs = [d for d in defs if d.handler == "rouge"]
    groups: dict[GenerationKey, dict[tuple[int, ...], int]] = {}
    for d in rouge_defs:
        prompts = groups.setdefault(_generation_key(d, run.settings), {})
        for item in run.encode(run.resolved[(d.name, "items")]):
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
    for d in rouge_defs:
        key, src = _generation_key(d, run.settings), run.resolved[(d.name, "items")]
        out[d.name] = [
            [_record(run.target.tokenizer, src, e, texts[key][groups[key][e.prompt_ids]]) for e in item]
            for item in run.encode(src)
        ]
    return out


def _gradnorms(
    run: _Run, defs: Sequence[MetricDef], stats_keys: set[int]
) -> tuple[dict[int, float], dict[int, TokenScores]]:
    """Gradient-norm scores by bank key, and the teacher-forced readings its forward gave for the same keys (the
    scoring pass then skips them: one forward serves both)."""
    from remnant.metrics.forward import ScoredSequence
    from remnant.metrics.gradnorm import gradnorm_pass

    keys = run.keys_of(defs, {"mia_gradnorm"})
    if not keys:
        return {}, {}
    p = next(d.params.get("p", 2) for d in defs if d.handler == "mia_gradnorm")
    seqs = [
        ScoredSequence(run.bank.sequences[k].full_ids, max(1, run.bank.sequences[k].label_start))
        for k in keys
    ]
    tok = run.target.tokenizer
    pad = tok.pad_token_id if tok.pad_token_id is not None else (tok.eos_token_id or 0)
    scores, readings = gradnorm_pass(
        run.target.model,
        seqs,
        p=float(p),
        batch_size=run.settings.batch_size,
        pad_id=int(pad),
        vocab_stats=[k in stats_keys for k in keys],
        progress=run.settings.progress,
    )
    return dict(zip(keys, scores, strict=True)), {keys[i]: r for i, r in readings.items()}


@dataclass
class _Readings:
    """What the model passes produced, by bank key."""

    target: dict[int, TokenScores]
    reference: dict[int, TokenScores]
    gradnorm: dict[int, float]
    generations: dict[str, list[list[GenerationRecord]]]


def _attack_scores(defn: MetricDef, run: _Run, readings: _Readings, side: str) -> list[float]:
    keys = [item[0] for item in run.keys[(defn.name, side)]]
    t = readings.target
    k = float(defn.params.get("k", 0.4))
    if defn.handler == "mia_loss":
        return [mia.loss_score(t[key]) for key in keys]
    if defn.handler == "mia_zlib":
        tok = run.target.tokenizer
        clean = tokenizer_cleans_up(tok)
        texts = [
            decode(tok, t[key].labels.tolist(), skip_special_tokens=True, clean_up=clean) for key in keys
        ]
        return [mia.zlib_score(t[key], text) for key, text in zip(keys, texts, strict=True)]
    if defn.handler == "mia_min_k":
        return [mia.min_k_score(t[key], k) for key in keys]
    if defn.handler == "mia_min_k_plus_plus":
        return [mia.min_k_plus_plus_score(t[key], k) for key in keys]
    if defn.handler == "mia_reference":
        return [mia.reference_score(t[key], readings.reference[key]) for key in keys]
    return [readings.gradnorm[key] for key in keys]


def _retain_input(defn: MetricDef, retain: RetainLog | None, notes: list[str]) -> Any:
    """What ``defn`` reads from the retain log (None when absent, with the note their code logs as a warning)."""
    if defn.retain_key is None:
        return None
    if defn.handler == "ks_test":
        if retain is None:
            notes.append(
                "forget_quality: no retain model log (--retain-logs); agg_value is null, as OpenUnlearning's"
            )
            return None
        scores = per_item_scores(retain.data, defn.retain_key, source=retain.source)
        if scores is None:
            raise ConfigError(
                f"{retain.source}: has no {defn.retain_key!r}, which forget_quality compares against",
                requirement="R23",
            )
        return scores
    value = aggregate(retain.data, defn.retain_key, source=retain.source) if retain is not None else None
    if value is None:
        ref = defn.params.get("ref_value", 0.5)
        notes.append(
            f"{defn.name}: no retain model {defn.retain_key} AUC; the retain AUC is ref_value = {ref}"
        )
    return value


def _compute(
    defn: MetricDef, handler: Any, run: _Run, readings: _Readings, logs: dict[str, MetricLog], retained: Any
) -> MetricLog:
    if defn.handler == "probability":
        items = [[readings.target[k] for k in item] for item in run.keys[(defn.name, "items")]]
        return handler.compute(items, multi=run.resolved[(defn.name, "items")].multi)  # type: ignore[no-any-return]
    if defn.handler in ("extraction_strength", "exact_memorization"):
        return handler.compute([readings.target[item[0]] for item in run.keys[(defn.name, "items")]])  # type: ignore[no-any-return]
    if defn.handler == "rouge":
        multi = run.resolved[(defn.name, "items")].multi
        return handler.compute(readings.generations[defn.name], multi=multi)  # type: ignore[no-any-return]
    if defn.handler.startswith("mia_"):
        forget = _attack_scores(defn, run, readings, "forget")
        return handler.compute(forget, _attack_scores(defn, run, readings, "holdout"))  # type: ignore[no-any-return]
    pre = {access: logs[dep] for dep, access in defn.pre_compute}
    if defn.handler == "ks_test":
        forget_tr = [float(v["score"]) for v in (pre["forget"].value_by_index or {}).values()]
        return handler.compute(forget_tr, retained)  # type: ignore[no-any-return]
    if defn.handler == "privleak":
        auc = pre["forget"].agg_value
        if auc is None:
            raise ConfigError("privleak: mia_min_k has no AUC", requirement="R23")
        return handler.compute(auc, retained)  # type: ignore[no-any-return]
    return handler.compute(pre)  # type: ignore[no-any-return]


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
    _check_reference(defs, target, reference)
    handlers = {d.name: registry.create("metric", d.handler, effective_params(d, settings)) for d in defs}
    notes: list[str] = []
    retained = {d.name: _retain_input(d, retain_log, notes) for d in defs}
    run = _Run(target, rows_of, prompt, settings)
    run.plan(defs)
    stats_keys = set(run.keys_of(defs, {"mia_min_k_plus_plus"}))  # μ_t, σ²_t only where min-k++ reads them
    gradnorm, scored = _gradnorms(run, defs, stats_keys)
    to_score = [k for k in run.keys_of(defs, TEACHER_FORCED) if k not in scored]
    readings = _Readings(
        target={**scored, **_pass(target, run, to_score, stats_keys=stats_keys, desc="scoring")},
        reference=(
            _pass(reference, run, run.keys_of(defs, {"mia_reference"}), stats_keys=set(), desc="reference")
            if reference is not None and any(d.handler == "mia_reference" for d in defs)
            else {}
        ),
        gradnorm=gradnorm,
        generations=_generations(run, defs),
    )
    logs: dict[str, MetricLog] = {}
    for defn in defs:
        logs[defn.name] = _compute(defn, handlers[defn.name], run, readings, logs, retained[defn.name])
    sources = {
        d.name: {side: run.resolved[(d.name, side)].to_dict() for side in _sides(d)}
        for d in defs
        if _sides(d)
    }
    return EvalResult(logs=logs, specs={n: h.spec for n, h in handlers.items()}, sources=sources, notes=notes)


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
