"""Area under the ROC curve as ``sklearn.metrics.roc_auc_score`` computes it, without sklearn.

The one definition lives in :func:`remnant.stats.roc_auc` (Mann–Whitney U over n_pos · n_neg, ties one half), so
the MIA attacks and the metric meta-evaluation (``remnant study meta-eval``) compute the same AUC; this module
keeps the metrics package's import path.
"""

from __future__ import annotations

from remnant.stats import roc_auc

__all__ = ["roc_auc"]
