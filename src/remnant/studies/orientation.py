"""Which way each metric points, so every study reads m with *higher = more target knowledge*.

The results table keeps each metric as the metric defines it (the sweep/study contract); the studies turn it into
m before any AUC, Q, R or correlation, as the UDS paper's meta-evaluation does (the UDS paper E.2: white-box scores
"plotted as 1 − score so higher values indicate more knowledge"):

* ``higher``: m = value (probabilities, ROUGE, extraction strength, MIA AUCs, κ, J-Access);
* ``one_minus``: m = 1 − value, for scores on [0, 1] where higher means *more erased* (UDS; OpenUnlearning's
  ``forget_truth_ratio``, whose ``closer_to_1_better`` aggregate is 1 at indistinguishable true/false answers;
  forget quality, a KS p-value against the retain model). The UDS paper's robustness formulas are not invariant
  to this choice (|m| enters Q's and R's denominators), so the paper's convention is kept;
* ``negate``: m = −value, for unbounded scores where higher means more erased (privleak, in percent, near −100
  while the forget data still looks like members; the no-retain UDS variant, in nats).

The study config may add or override entries (pre-registered with it); a metric with no known orientation is
left out of every study and listed with the reason, never guessed from the data (a data-chosen sign would bias
every AUC above one half).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

Orientation = Literal["higher", "one_minus", "negate"]

#: Known metrics and audits: how to turn each into m (higher = more knowledge).
DEFAULT_ORIENTATION: dict[str, Orientation] = {
    # OpenUnlearning's TOFU forget metrics (metrics/catalogue.py)
    "forget_Q_A_Prob": "higher",
    "forget_Q_A_PARA_Prob": "higher",
    "forget_Q_A_ROUGE": "higher",
    "forget_Q_A_PARA_ROUGE": "higher",
    "forget_truth_ratio": "one_minus",
    "forget_quality": "one_minus",
    "extraction_strength": "higher",
    "exact_memorization": "higher",
    "mia_loss": "higher",
    "mia_zlib": "higher",
    "mia_min_k": "higher",
    "mia_min_k_plus_plus": "higher",
    "mia_gradnorm": "higher",
    "mia_reference": "higher",
    "privleak": "negate",
    # remnant's recall rate on canaries / probes
    "kappa": "higher",
    # white-box audits (remnant.latent)
    "uds": "one_minus",
    "logit_lens_uds": "one_minus",
    "uds_no_retain": "negate",
    "j_access": "higher",
    "j_access_refit": "higher",
    "logit_lens_access": "higher",
    "direction_survival": "higher",
}

#: Columns that describe utility, never forgetting: not studied as audits.
UTILITY_COLUMNS = frozenset({"utility", "model_utility"})
_UTILITY_PREFIXES = ("retain_", "ra_", "wf_")


def orient(value: float, how: Orientation) -> float:
    """m for one value: higher means more target knowledge."""
    if how == "higher":
        return value
    if how == "one_minus":
        return 1.0 - value
    return -value


def oriented_shift(before: float | None, after: float | None, how: Orientation) -> float | None:
    """The change of m from ``before`` to ``after`` (a relearning shift): ``orient(after) − orient(before)``;
    None when either value is missing."""
    return orient(after, how) - orient(before, how) if before is not None and after is not None else None


def is_utility(column: str) -> bool:
    """Utility-side columns (model utility, retain/real-authors/world-facts metrics) are not audits."""
    return column in UTILITY_COLUMNS or column.startswith(_UTILITY_PREFIXES)


def resolve(
    columns: list[str] | tuple[str, ...],
    requested: list[str] | None,
    overrides: Mapping[str, Orientation],
) -> tuple[dict[str, Orientation], dict[str, str]]:
    """The metrics a study reads, each with its orientation, and those left out with the reason.

    ``requested=None`` takes every metric column that is not utility-side; an explicit list keeps its order and
    names a column the table lacks as skipped.
    """
    table = dict.fromkeys(columns)
    names = list(requested) if requested is not None else [c for c in columns if not is_utility(c)]
    kept: dict[str, Orientation] = {}
    skipped: dict[str, str] = {}
    for name in names:
        how = overrides.get(name, DEFAULT_ORIENTATION.get(name))
        if name not in table:
            skipped[name] = "not a column of the results table"
        elif how is None:
            skipped[name] = "orientation unknown: declare it in the study config (orientation.NAME)"
        else:
            kept[name] = how
    return kept, skipped


__all__ = ["DEFAULT_ORIENTATION", "Orientation", "is_utility", "orient", "oriented_shift", "resolve"]
