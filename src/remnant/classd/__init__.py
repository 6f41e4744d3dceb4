"""Class D battery (Standard §5): singling out, linkability and inference on installed canaries, net of
never-installed control entities (D4), against the declared insignificance bar (D-5.1, D-5.2).

Modules, one concept each:

- :mod:`~remnant.classd.canaries` — target/control probe sets and counts (D4);
- :mod:`~remnant.classd.singling_out` (D-2.1, D-2.2), :mod:`~remnant.classd.linkability` (D-3.1, D-3.2),
  :mod:`~remnant.classd.inference` (D-4.1, D-4.2) — each registered under kind ``classd``;
- :mod:`~remnant.classd.battery` — what the battery runs (its spec, probe sets and many-shot demonstrations; D-5.3);
- :mod:`~remnant.statement.classd_bar` — the insignificance bar and the statement's ``class_d`` block (D-5.1, D-5.2);
- :mod:`~remnant.classd.design` — the canary design record, the comparison warning (D5), pack-size support (R21).

Importing this package registers the three components and never imports torch; model passes import it inside
the functions that run them.
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
from remnant.statement.classd_bar import ClassDBar, NetRate, RiskBar, bar_from_facts, evaluate_bar, net_rate

__all__ = [
    "RISKS",
    "BatterySpec",
    "CanaryDesign",
    "CanaryProbes",
    "CanarySupport",
    "ClassDBar",
    "Inference",
    "Linkability",
    "NetRate",
    "RiskBar",
    "RiskCounts",
    "SinglingOut",
    "bar_from_facts",
    "canary_support",
    "class_d_canaries",
    "comparison_warning",
    "count",
    "demonstrations",
    "design_differences",
    "design_of",
    "evaluate_bar",
    "inference_probes",
    "linkability_probes",
    "net_rate",
    "option_loglikelihoods",
    "pack_support",
    "population_guesses",
    "score_by_likelihood",
    "singling_out_probes",
]
