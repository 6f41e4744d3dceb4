"""The named metrics of OpenUnlearning's TOFU and MUSE suites (configs/eval/tofu_metrics/*.yaml,
configs/eval/muse_metrics/*.yaml): which handler, which parameters, which split and fields, which other metrics
they are computed from, and what they read from a retain model's log. Names are their log keys
(``forget_truth_ratio``, not the file name ``forget_Truth_Ratio``, which is accepted as an alias).

Each metric's splits and fields are those of docs/metrics.md, "The metrics" (TOFU) and "The MUSE suite" (MUSE
``config/split`` names, :mod:`remnant.formats.muse`). Forget and retain metrics ask the evaluation's question field;
real authors, world facts and holdout always ask ``question``, as their configs do."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from remnant.errors import ConfigError
from remnant.metrics.utility import MODEL_UTILITY_PARTS

FORGET = "{forget}_perturbed"
RETAIN = "retain_perturbed"
RA = "real_authors_perturbed"
WF = "world_facts_perturbed"
HOLDOUT = "{holdout}"

Suite = Literal["tofu", "muse"]
#: How a split's rows become token ids: a question/answer pair in the prompt format (their
#: ``preprocess_chat_instance``), or a prefix and its continuation as plain text (``preprocess_pretraining_instance``).
Encoding = Literal["qa", "completion"]


@dataclass(frozen=True)
class Source:
    """Where a metric's items come from: a split (template), the answer field, the question field (``None``: the
    evaluation's). ``encoding="completion"`` reads ``question_key`` as the prefix field (absent from a row: empty,
    as their ``CompletionDataset`` takes it) and ``answer_key`` as the text, keeping ``max_length`` text tokens, joined
    with a space when ``insert_space``. ``few_shot`` names a split whose rows are every ``qa`` item's in-context
    examples."""

    split: str
    answer_key: str
    question_key: str | None = None
    encoding: Encoding = "qa"
    few_shot: str | None = None
    insert_space: bool = False
    max_length: int = 2048

    def resolve(self, forget: str, holdout: str, question_key: str) -> ResolvedSource:
        return ResolvedSource(
            self.split.format(forget=forget, holdout=holdout),
            self.answer_key,
            self.question_key or question_key,
            self.encoding,
            self.few_shot,
            self.insert_space,
            self.max_length,
        )


@dataclass(frozen=True)
class ResolvedSource(Source):
    """A :class:`Source` with the evaluation's splits and question field filled in."""

    question_key: str = ""

    @property
    def multi(self) -> bool:
        """Several answers per item (the perturbed ones)."""
        return self.answer_key == "perturbed_answer"

    @property
    def splits(self) -> tuple[str, ...]:
        """Every split read: the items' and, when there are in-context examples, theirs."""
        return (self.split,) if self.few_shot is None else (self.split, self.few_shot)

    def to_dict(self) -> dict[str, object]:
        if self.encoding == "completion":
            return {
                "split": self.split,
                "encoding": "completion",
                "prefix_key": self.question_key,
                "text_key": self.answer_key,
                "insert_space": self.insert_space,
                "max_length": self.max_length,
            }
        out: dict[str, object] = {
            "split": self.split,
            "answer_key": self.answer_key,
            "question_key": self.question_key,
        }
        if self.few_shot is not None:
            out["few_shot"] = self.few_shot
        return out


@dataclass(frozen=True)
class MetricDef:
    """One named metric: its registered handler and parameters, its items, dependencies and retain-log input."""

    name: str
    handler: str
    params: Mapping[str, Any] = field(default_factory=dict)
    source: Source | None = None
    holdout: Source | None = None
    pre_compute: tuple[tuple[str, str], ...] = ()
    retain_key: str | None = None


def _prob(name: str, split: str, answer: str, question: str | None = None) -> MetricDef:
    return MetricDef(name, "probability", source=Source(split, answer, question))


def _rouge(name: str, split: str, answer: str, question: str | None = None) -> MetricDef:
    return MetricDef(name, "rouge", {"rouge_type": "rougeL_recall"}, source=Source(split, answer, question))


def _tr(name: str, aggregator: str, correct: str, wrong: str) -> MetricDef:
    return MetricDef(
        name, "truth_ratio", {"aggregator": aggregator}, pre_compute=((correct, "correct"), (wrong, "wrong"))
    )


def _normalised(name: str, correct: str, wrong: str) -> MetricDef:
    return MetricDef(name, "probability_w_options", pre_compute=((correct, "correct"), (wrong, "wrong")))


#: The membership attacks (handler = log key) and their parameters, in their configs' order (both suites).
MIA_PARAMS: tuple[tuple[str, Mapping[str, object]], ...] = (
    ("mia_loss", {}),
    ("mia_zlib", {}),
    ("mia_min_k", {"k": 0.4}),
    ("mia_min_k_plus_plus", {"k": 0.4}),
    ("mia_gradnorm", {"p": 2}),
    ("mia_reference", {}),
)


def _memorization_and_privacy(items: Source, forget: Source, holdout: Source) -> list[MetricDef]:
    """What both suites define alike on their own splits: ES and EM on ``items``, the membership attacks (forget
    against holdout) and privleak over min-k's AUC, the retain model's ``mia_min_k`` AUC read from its log."""
    return [
        MetricDef("extraction_strength", "extraction_strength", source=items),
        MetricDef("exact_memorization", "exact_memorization", source=items),
        *(MetricDef(name, name, dict(params), source=forget, holdout=holdout) for name, params in MIA_PARAMS),
        MetricDef(
            "privleak",
            "privleak",
            {"ref_value": 0.5},
            pre_compute=(("mia_min_k", "forget"),),
            retain_key="mia_min_k",
        ),
    ]


def _tofu() -> dict[str, MetricDef]:
    defs = [
        _prob("forget_Q_A_Prob", FORGET, "answer"),
        _prob("forget_Q_A_PARA_Prob", FORGET, "paraphrased_answer"),
        _prob("forget_Q_A_PERT_Prob", FORGET, "perturbed_answer"),
        _tr("forget_truth_ratio", "closer_to_1_better", "forget_Q_A_PARA_Prob", "forget_Q_A_PERT_Prob"),
        MetricDef(
            "forget_quality",
            "ks_test",
            pre_compute=(("forget_truth_ratio", "forget"),),
            retain_key="forget_truth_ratio",
        ),
        _rouge("forget_Q_A_ROUGE", FORGET, "answer"),
        _rouge("forget_Q_A_PARA_ROUGE", FORGET, "paraphrased_answer"),
        _rouge("forget_Q_A_PERT_ROUGE", FORGET, "perturbed_answer"),
        _prob("retain_Q_A_Prob", RETAIN, "answer"),
        _prob("retain_Q_A_PARA_Prob", RETAIN, "paraphrased_answer"),
        _prob("retain_Q_A_PERT_Prob", RETAIN, "perturbed_answer"),
        _rouge("retain_Q_A_ROUGE", RETAIN, "answer"),
        _tr("retain_Truth_Ratio", "true_better", "retain_Q_A_PARA_Prob", "retain_Q_A_PERT_Prob"),
        _prob("ra_Q_A_Prob", RA, "answer", "question"),
        _prob("ra_Q_A_PERT_Prob", RA, "perturbed_answer", "question"),
        _normalised("ra_Q_A_Prob_normalised", "ra_Q_A_Prob", "ra_Q_A_PERT_Prob"),
        _rouge("ra_Q_A_ROUGE", RA, "answer", "question"),
        _tr("ra_Truth_Ratio", "true_better", "ra_Q_A_Prob", "ra_Q_A_PERT_Prob"),
        _prob("wf_Q_A_Prob", WF, "answer", "question"),
        _prob("wf_Q_A_PERT_Prob", WF, "perturbed_answer", "question"),
        _normalised("wf_Q_A_Prob_normalised", "wf_Q_A_Prob", "wf_Q_A_PERT_Prob"),
        _rouge("wf_Q_A_ROUGE", WF, "answer", "question"),
        _tr("wf_Truth_Ratio", "true_better", "wf_Q_A_Prob", "wf_Q_A_PERT_Prob"),
        MetricDef("model_utility", "hm_aggregate", pre_compute=tuple((p, p) for p in MODEL_UTILITY_PARTS)),
        *_memorization_and_privacy(
            Source(FORGET, "answer"), Source(FORGET, "answer"), Source(HOLDOUT, "answer", "question")
        ),
    ]
    return {d.name: d for d in defs}


#: Every named TOFU metric ``remnant eval`` computes.
TOFU_METRICS: dict[str, MetricDef] = _tofu()

#: MUSE knowmem's stop strings and verbmem's completion fields (configs/eval/muse_metrics/*.yaml,
#: configs/data/datasets/MUSE_*.yaml).
MUSE_STOPWORDS = ("\n\n", "\nQuestion", "Question:")
VERBMEM = Source("verbmem/forget", "gt", "prompt", encoding="completion", insert_space=True)
MIA_FORGET = Source("privleak/forget", "text", "prompt", encoding="completion")
MIA_HOLDOUT = Source("privleak/holdout", "text", "prompt", encoding="completion")


def _knowmem(name: str, split: str) -> MetricDef:
    params = {"rouge_type": "rougeL_f1", "max_new_tokens": 32, "stopwords": MUSE_STOPWORDS}
    source = Source(f"knowmem/{split}", "answer", "question", few_shot=f"knowmem/{split}_icl")
    return MetricDef(name, "rouge", params, source=source)


def _muse() -> dict[str, MetricDef]:
    defs = [
        _knowmem("forget_knowmem_ROUGE", "forget_qa"),
        _knowmem("retain_knowmem_ROUGE", "retain_qa"),
        MetricDef(
            "forget_verbmem_ROUGE",
            "rouge",
            {"rouge_type": "rougeL_f1", "max_new_tokens": 128},
            source=VERBMEM,
        ),
        *_memorization_and_privacy(VERBMEM, MIA_FORGET, MIA_HOLDOUT),
    ]
    return {d.name: d for d in defs}


#: Every named MUSE metric ``remnant eval`` computes (their ``forget_gibberish`` needs a hub classifier: not offered).
MUSE_METRICS: dict[str, MetricDef] = _muse()

SUITES: dict[str, dict[str, MetricDef]] = {"tofu": TOFU_METRICS, "muse": MUSE_METRICS}

#: Their config file names that differ from the log key they write.
ALIASES = {"forget_Truth_Ratio": "forget_truth_ratio"}

#: Their default TOFU suite (configs/eval/tofu.yaml).
DEFAULT_TOFU = (
    "forget_truth_ratio",
    "forget_quality",
    "forget_Q_A_Prob",
    "forget_Q_A_ROUGE",
    "model_utility",
    "privleak",
    "extraction_strength",
)

#: Their default MUSE suite (configs/eval/muse.yaml; the rest of its list is commented out there).
DEFAULT_MUSE = (
    "forget_knowmem_ROUGE",
    "retain_knowmem_ROUGE",
    "forget_verbmem_ROUGE",
    "privleak",
    "extraction_strength",
)

DEFAULTS: dict[str, tuple[str, ...]] = {"tofu": DEFAULT_TOFU, "muse": DEFAULT_MUSE}


def plugin_metrics(suite: Suite) -> dict[str, MetricDef]:
    """Named metrics that plugins' metric classes declare for ``suite`` in their class attribute ``named_metrics =
    {suite: (MetricDef, ...)}`` (docs/extending.md), since a plugin cannot add to the lists above. A name the suite
    already has is a ConfigError naming the plugin (two definitions of one log key would make logs ambiguous; R23)."""
    from remnant import registry

    out: dict[str, MetricDef] = {}
    for plugin in registry.plugins("metric"):
        for handler in plugin.names:
            for defn in registry.get("metric", handler).named_metrics.get(suite, ()):
                if defn.name in SUITES[suite] or defn.name in out:
                    raise ConfigError(
                        f"plugin {plugin.distribution!r} (entry point '{plugin.entry_point}') defines metric "
                        f"{defn.name!r}, which the {suite.upper()} suite already has",
                        requirement="R23",
                    )
                out[defn.name] = defn
    return out


def suite_metrics(suite: Suite) -> dict[str, MetricDef]:
    """Every named metric of ``suite``: the built-in catalogue, then the plugins' (:func:`plugin_metrics`)."""
    return {**SUITES[suite], **plugin_metrics(suite)}


def lookup(name: str, suite: Suite = "tofu") -> MetricDef:
    """The definition of ``name`` (or of its alias) in ``suite``; an unknown name is a ConfigError listing the known
    ones (and saying so when the name belongs to the other suite)."""
    metrics = suite_metrics(suite)
    key = ALIASES.get(name, name)
    defn = metrics.get(key)
    if defn is None:
        both: tuple[Suite, ...] = ("tofu", "muse")
        other = next((s for s in both if s != suite and key in suite_metrics(s)), None)
        hint = f" ({name!r} is a {other.upper()} metric: --suite {other})" if other else ""
        known = ", ".join(sorted(metrics))
        raise ConfigError(
            f"unknown metric {name!r} in the {suite.upper()} suite{hint}; known metrics: {known}",
            requirement="R23",
        )
    return defn


def with_dependencies(names: list[str], suite: Suite = "tofu") -> list[MetricDef]:
    """The requested metrics and everything they are computed from, dependencies first, each once."""
    ordered: list[MetricDef] = []
    seen: set[str] = set()

    def visit(defn: MetricDef) -> None:
        if defn.name in seen:
            return
        seen.add(defn.name)
        for dep, _ in defn.pre_compute:
            visit(lookup(dep, suite))
        ordered.append(defn)

    for name in names:
        visit(lookup(name, suite))
    return ordered


__all__ = [
    "ALIASES",
    "DEFAULTS",
    "DEFAULT_MUSE",
    "DEFAULT_TOFU",
    "MUSE_METRICS",
    "MUSE_STOPWORDS",
    "SUITES",
    "TOFU_METRICS",
    "Encoding",
    "MetricDef",
    "ResolvedSource",
    "Source",
    "Suite",
    "lookup",
    "plugin_metrics",
    "suite_metrics",
    "with_dependencies",
]
