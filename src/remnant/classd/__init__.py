"""Class D battery (Standard §5): singling out, linkability and inference on installed canaries, net of
never-installed control entities (D4), against the declared insignificance bar (D-5.1, D-5.2; the bar itself is
:mod:`remnant.statement.classd_bar`).

Importing this package registers the three components (kind ``classd``) and never imports torch; model passes
import it inside the functions that run them.
"""

from __future__ import annotations

from remnant.classd.battery import (
    BatterySpec,
    class_d_canaries,
    demonstrations,
)
from remnant.classd.canaries import RISKS, CanaryProbes, RiskCounts, count
from remnant.classd.design import (
    CanaryDesign,
    CanarySupport,
    canary_support,
    comparison_warning,
    design_differences,
    design_of,
    pack_support,
)
from remnant.classd.inference import Inference, inference_probes, population_guesses
from remnant.classd.linkability import (
    Linkability,
    linkability_probes,
    option_loglikelihoods,
    score_by_likelihood,
)
from remnant.classd.singling_out import SinglingOut, singling_out_probes

__all__ = [
    "RISKS",
    "BatterySpec",
    "CanaryDesign",
    "CanaryProbes",
    "CanarySupport",
    "Inference",
    "Linkability",
    "RiskCounts",
    "SinglingOut",
    "canary_support",
    "class_d_canaries",
    "comparison_warning",
    "count",
    "demonstrations",
    "design_differences",
    "design_of",
    "inference_probes",
    "linkability_probes",
    "option_loglikelihoods",
    "pack_support",
    "population_guesses",
    "score_by_likelihood",
    "singling_out_probes",
]
