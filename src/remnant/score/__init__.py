"""Scoring (R6–R12, R19): capability κ and willingness w kept apart, utility on two scales, rates with Wilson.

Torch-free pieces are imported here; ``remnant.score.kappa`` and ``remnant.score.capability`` (model passes)
and ``remnant.score.utility`` (the ``utility`` registry) are imported on use.
"""

from remnant.score.normalise import NORMALISATION_VERSION, answer_matches, normalise_answer
from remnant.score.probe import Probe, ResponseFormat, probes_from_pack, target_format
from remnant.score.rates import Rate
from remnant.score.scorer import SCORER_VERSION, Scorer
from remnant.score.willingness import REFUSAL_CRITERION_VERSION, Judge, RefusalCriterion

__all__ = [
    "NORMALISATION_VERSION",
    "REFUSAL_CRITERION_VERSION",
    "SCORER_VERSION",
    "Judge",
    "Probe",
    "Rate",
    "RefusalCriterion",
    "ResponseFormat",
    "Scorer",
    "answer_matches",
    "normalise_answer",
    "probes_from_pack",
    "target_format",
]
