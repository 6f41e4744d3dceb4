"""The named metrics of OpenUnlearning's TOFU suite (configs/eval/tofu_metrics/*.yaml): which handler, which
parameters, which split and fields, which other metrics they are computed from, and what they read from a retain
model's log. Names are their log keys (``forget_truth_ratio``, not the file name ``forget_Truth_Ratio``, which is
accepted as an alias).

Splits: forget metrics read ``{forget}_perturbed`` (e.g. ``forget10_perturbed``); retain metrics
``retain_perturbed``; ``ra_*`` ``real_authors_perturbed``; ``wf_*`` ``world_facts_perturbed``; the attacks' holdout
side ``{holdout}`` (e.g. ``holdout10``). Forget and retain metrics ask the evaluation's question field (``question``
or ``paraphrased_question``); real authors, world facts and holdout always ask ``question``, as their configs do.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from remnant.errors import ConfigError
from remnant.metrics.utility import MODEL_UTILITY_PARTS

FORGET = "{forget}_perturbed"
RETAIN = "retain_perturbed"
RA = "real_authors_perturbed"
WF = "world_facts_perturbed"
HOLDOUT = "{holdout}"


@dataclass(frozen=True)
class Source:
    """Where a metric's items come from: a split (template), the answer field, the question field (``None``: the
    evaluation's question field)."""

    split: str
    answer_key: str
    question_key: str | None = None

    def resolve(self, forget: str, holdout: str, question_key: str) -> ResolvedSource:
        return ResolvedSource(
            split=self.split.format(forget=forget, holdout=holdout),
            answer_key=self.answer_key,
            question_key=self.question_key or question_key,
        )


@dataclass(frozen=True)
class ResolvedSource:
    """A :class:`Source` with the evaluation's splits and question field filled in."""

    split: str
    answer_key: str
    question_key: str

    @property
    def multi(self) -> bool:
        """Several answers per item (the perturbed ones)."""
        return self.answer_key == "perturbed_answer"

    def to_dict(self) -> dict[str, str]:
        return {"split": self.split, "answer_key": self.answer_key, "question_key": self.question_key}


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


def _mia(name: str, params: Mapping[str, Any] | None = None) -> MetricDef:
    return MetricDef(
        name,
        name,
        dict(params or {}),
        source=Source(FORGET, "answer"),
        holdout=Source(HOLDOUT, "answer", "question"),
    )


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
        MetricDef("extraction_strength", "extraction_strength", source=Source(FORGET, "answer")),
        MetricDef("exact_memorization", "exact_memorization", source=Source(FORGET, "answer")),
        _mia("mia_loss"),
        _mia("mia_zlib"),
        _mia("mia_min_k", {"k": 0.4}),
        _mia("mia_min_k_plus_plus", {"k": 0.4}),
        _mia("mia_gradnorm", {"p": 2}),
        _mia("mia_reference"),
        MetricDef(
            "privleak",
            "privleak",
            {"ref_value": 0.5},
            pre_compute=(("mia_min_k", "forget"),),
            retain_key="mia_min_k",
        ),
    ]
    return {d.name: d for d in defs}


#: Every named metric ``remnant eval`` computes.
TOFU_METRICS: dict[str, MetricDef] = _tofu()

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


def lookup(name: str) -> MetricDef:
    """The definition of ``name`` (or of its alias); an unknown name is a ConfigError listing the known ones."""
    defn = TOFU_METRICS.get(ALIASES.get(name, name))
    if defn is None:
        known = ", ".join(sorted(TOFU_METRICS))
        raise ConfigError(f"unknown metric {name!r}; known metrics: {known}", requirement="R23")
    return defn


def with_dependencies(names: list[str]) -> list[MetricDef]:
    """The requested metrics and everything they are computed from, dependencies first, each once."""
    ordered: list[MetricDef] = []
    seen: set[str] = set()

    def visit(defn: MetricDef) -> None:
        if defn.name in seen:
            return
        seen.add(defn.name)
        for dep, _ in defn.pre_compute:
            visit(lookup(dep))
        ordered.append(defn)

    for name in names:
        visit(lookup(name))
    return ordered


__all__ = [
    "ALIASES",
    "DEFAULT_TOFU",
    "TOFU_METRICS",
    "MetricDef",
    "ResolvedSource",
    "Source",
    "lookup",
    "with_dependencies",
]
