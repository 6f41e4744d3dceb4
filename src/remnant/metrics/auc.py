"""Area under the ROC curve as ``sklearn.metrics.roc_auc_score`` computes it, without sklearn.

AUC = P(score of a positive > score of a negative) + ½ P(tie), which is the Mann–Whitney U statistic over
n_pos · n_neg: U = R_pos − n_pos(n_pos + 1)/2 with R_pos the sum of the positives' mid-ranks (tied scores share the
mean of their ranks). roc_auc_score's trapezoid over the ROC curve gives the same number: a tie between a positive
and a negative is a diagonal ROC step, worth one half.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.stats import rankdata  # type: ignore[import-untyped]  # scipy ships no stubs

from remnant.errors import ConfigError


def roc_auc(negatives: Sequence[float], positives: Sequence[float]) -> float:
    """AUC of scores where ``positives`` should score higher; both sets must be non-empty (as roc_auc_score)."""
    if not negatives or not positives:
        raise ConfigError(
            "an AUC needs at least one score in each class (roc_auc_score refuses one class too)",
            requirement="R23",
        )
    scores = np.asarray([*negatives, *positives], dtype=np.float64)
    if not np.all(np.isfinite(scores)):
        raise ConfigError("an AUC cannot be computed over non-finite scores", requirement="R23")
    ranks = rankdata(scores)  # mid-ranks for ties
    n_neg, n_pos = len(negatives), len(positives)
    u = float(ranks[n_neg:].sum()) - n_pos * (n_pos + 1) / 2
    return u / (n_pos * n_neg)


__all__ = ["roc_auc"]
