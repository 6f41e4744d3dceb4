"""Scoring: capability κ and (to come) willingness w, utility u, rates (R6–R12, R19)."""

from remnant.score.normalise import NORMALISATION_VERSION, answer_matches, normalise_answer

__all__ = ["NORMALISATION_VERSION", "answer_matches", "normalise_answer"]
