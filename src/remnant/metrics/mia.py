"""Membership-inference AUCs (``mia_loss``, ``mia_zlib``, ``mia_min_k``, ``mia_min_k_plus_plus``, ``mia_gradnorm``,
``mia_reference``): their ``mia_auc`` over forget (members) and holdout (non-members); each score is defined in
docs/metrics.md, "The metrics".

Sign convention (theirs): every score is signed like a loss (higher = less member-like) and the AUC labels forget
0 and holdout 1, so AUC ≈ 1 means the forget set still looks memorised, ≈ 0.5 indistinguishable, ≈ 0
over-forgotten. The entry holds ``forget`` and ``holdout`` (each ``agg_value`` = mean score and per-item
``{"score": s}``), ``auc`` and ``agg_value`` (= auc)."""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence

import numpy as np

from remnant.errors import ConfigError
from remnant.metrics.base import Metric, Readings, Reads
from remnant.metrics.evallog import MetricLog
from remnant.metrics.memorization import score_log
from remnant.metrics.scores import TokenScores
from remnant.registry import register
from remnant.stats import roc_auc


def loss_score(scores: TokenScores) -> float:
    """LOSS attack: mean NLL over every labelled token."""
    return scores.avg_loss


def zlib_score(scores: TokenScores, text: str) -> float:
    """zlib attack: mean NLL over the zlib-compressed length of the answer text in bytes."""
    return scores.avg_loss / len(zlib.compress(text.encode("utf-8")))


def _bottom_k_mean(values: np.ndarray, k: float) -> float:
    count = max(1, int(len(values) * k))
    return float(np.mean(np.sort(values)[:count]))


def min_k_score(scores: TokenScores, k: float = 0.4) -> float:
    """min-k% attack: −mean of the lowest ⌊k·n⌋ (≥ 1) token log-probabilities, last label dropped; empty: 0."""
    lp = scores.drop_last().logprobs
    return 0.0 if lp.size == 0 else -_bottom_k_mean(lp, k)


def min_k_plus_plus_score(scores: TokenScores, k: float = 0.4) -> float:
    """min-k%++ attack over vocabulary-normalised log-probabilities, last label dropped; empty: 0."""
    s = scores.drop_last()
    if len(s) == 0:
        return 0.0
    if s.mu is None or s.var is None:
        raise ValueError("min-k++ needs a pass run with vocab_stats=True")
    z = (s.logprobs - s.mu) / np.sqrt(np.maximum(s.var, 1e-6))
    return -_bottom_k_mean(z, k)


def reference_score(target: TokenScores, reference: TokenScores) -> float:
    """Reference attack: target mean NLL minus the reference model's on the same ids."""
    return target.avg_loss - reference.avg_loss


def mia_log(forget: Sequence[float], holdout: Sequence[float]) -> MetricLog:
    """The entry of one attack: both sides' scores, and the AUC with holdout as the positive class."""
    auc = roc_auc(negatives=forget, positives=holdout)
    return MetricLog(
        agg_value=auc,
        extra={"forget": score_log(forget).to_json(), "holdout": score_log(holdout).to_json(), "auc": auc},
    )


class _Attack(Metric):
    """Shared by the attacks: a per-item score of each side's first answer, turned into the logged entry."""

    reads = frozenset({Reads.TEACHER_FORCED})

    def score(self, readings: Readings, side: str) -> list[float]:
        return [self.score_one(item[0]) for item in readings.scores[side]]

    def score_one(self, scores: TokenScores) -> float:
        raise NotImplementedError

    def compute(self, readings: Readings) -> MetricLog:
        return mia_log(self.score(readings, "forget"), self.score(readings, "holdout"))


@register("metric", "mia_loss", "1")
class LossAttack(_Attack):
    """AUC of the mean NLL (EOS included), forget vs holdout."""

    def score_one(self, scores: TokenScores) -> float:
        return loss_score(scores)


@register("metric", "mia_zlib", "1")
class ZlibAttack(_Attack):
    """AUC of mean NLL over zlib-compressed answer bytes, forget vs holdout."""

    def score(self, readings: Readings, side: str) -> list[float]:
        items = [item[0] for item in readings.scores[side]]
        return [zlib_score(s, readings.decode(s.labels.tolist())) for s in items]


class _MinK(_Attack):
    def __init__(self, k: float = 0.4) -> None:
        if not 0 < k <= 1 or not math.isfinite(k):
            raise ConfigError("min-k: k must lie in (0, 1]", requirement="R23")
        self.k = k


@register("metric", "mia_min_k", "1")
class MinKAttack(_MinK):
    """AUC of −mean lowest-k token log-probabilities (k = 0.4, last label dropped), forget vs holdout."""

    def score_one(self, scores: TokenScores) -> float:
        return min_k_score(scores, self.k)


@register("metric", "mia_min_k_plus_plus", "1")
class MinKPlusPlusAttack(_MinK):
    """AUC of min-k over vocabulary-normalised log-probabilities (k = 0.4), forget vs holdout."""

    reads = frozenset({Reads.VOCAB_STATS})

    def score_one(self, scores: TokenScores) -> float:
        return min_k_plus_plus_score(scores, self.k)


@register("metric", "mia_gradnorm", "1")
class GradNormAttack(_Attack):
    """AUC of the mean over parameter tensors of each gradient's p-norm (p = 2), forget vs holdout."""

    reads = frozenset({Reads.GRADIENT_NORMS})

    def __init__(self, p: float = 2) -> None:
        if float(p) not in (1.0, 2.0, float("inf")):
            raise ConfigError("gradient norm: p must be 1, 2 or inf", requirement="R23")
        self.p = p
        self.gradient_p = float(p)

    def score(self, readings: Readings, side: str) -> list[float]:
        return list(readings.gradient_norms[side])


@register("metric", "mia_reference", "1")
class ReferenceAttack(_Attack):
    """AUC of target NLL minus a reference model's NLL, forget vs holdout (needs ``--reference``)."""

    reads = frozenset({Reads.TEACHER_FORCED, Reads.REFERENCE_PASS})

    def score(self, readings: Readings, side: str) -> list[float]:
        pairs = zip(readings.scores[side], readings.reference[side], strict=True)
        return [reference_score(t[0], r[0]) for t, r in pairs]


__all__ = [
    "GradNormAttack",
    "LossAttack",
    "MinKAttack",
    "MinKPlusPlusAttack",
    "ReferenceAttack",
    "ZlibAttack",
    "loss_score",
    "mia_log",
    "min_k_plus_plus_score",
    "min_k_score",
    "reference_score",
    "zlib_score",
]
