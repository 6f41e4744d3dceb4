"""Linkability (D-3.1, D-3.2): does the model tie two attributes to the same entity?

The pack's link items ask which company employs the person with a given staff code, with the true employer among
distractor employers drawn from other installed entities (D-3.2; :func:`remnant.packs.classd._link_item`), so a
model that merely knows which employers occur in the data scores at chance. Two scorings:

- **by option likelihood**: the option whose text, as the whole answer, has the highest summed log-probability
  after the question (:func:`option_loglikelihoods`; the answer is encoded as training encodes it);
- **by generation**: the lettered question through the generation path and any attack defined for multiple
  choice, scored by the letter or the uniquely named option (``remnant.score.Scorer``).

Chance is 1/options; it is the ``baseline`` the facts take the rate net of, and never-installed control entities
under the same scoring give the control-entity rate (D4, D-3.1). torch is imported inside the functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from remnant.classd.canaries import (
    CONTROL_SPLIT,
    TARGET_SPLIT,
    CanaryProbes,
    RiskCounts,
    count,
    entity_names,
    items_of,
    require_class_d,
)
from remnant.errors import ConfigError, PackError
from remnant.registry import register
from remnant.score.probe import Probe

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from remnant.models.prompts import PromptFormat
    from remnant.packs.schema import Pack


def _probes(pack: Pack, split: str) -> tuple[Probe, ...]:
    names = entity_names(pack)
    out = []
    for item in items_of(pack, split, "link"):
        if not item.options or item.answer_index is None:
            raise PackError(f"pack {pack.manifest.id}: link item {item.id!r} has no options (D-3.2)")
        out.append(Probe.from_item(item, names.get(str(item.entity_id))))
    return tuple(out)


def linkability_probes(pack: Pack) -> CanaryProbes:
    """Forced-choice linkage probes on target canaries and control entities, chance as baseline (D-3, D4)."""
    require_class_d(pack)
    target, control = _probes(pack, TARGET_SPLIT), _probes(pack, CONTROL_SPLIT)

    def chance(probes: Sequence[Probe]) -> float | None:
        return sum(p.chance_rate for p in probes) / len(probes) if probes else None

    return CanaryProbes(
        risk="linkability",
        target=target,
        control=control,
        baseline=chance(target),
        control_baseline=chance(control),
        detail={
            "linked": ["staff_code", "employer"],
            "distractors": "employers of other installed entities (D-3.2)",
            "options": sorted({len(p.options or ()) for p in (*target, *control)}),
        },
    )


def option_loglikelihoods(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    fmt: PromptFormat,
    question: str,
    options: Sequence[str],
) -> list[float]:
    """Summed log-probability of each option as the complete answer to ``question`` (one batched forward).

    Each option is encoded as :func:`remnant.models.prompts.encode_pair` encodes a training answer (with the
    end-of-turn), so the likelihood is of exactly that answer in the format the canaries were installed in.
    """
    from remnant.models.prompts import encode_pair
    from remnant.score.kappa import answer_loglikelihoods

    return answer_loglikelihoods(model, [encode_pair(tokenizer, question, opt, fmt) for opt in options])


def option_choice(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, fmt: PromptFormat, probe: Probe
) -> int:
    """The option with the highest likelihood; ties go to the first (deterministic)."""
    from remnant.score.kappa import best_option

    assert probe.options is not None
    return best_option(option_loglikelihoods(model, tokenizer, fmt, probe.question, probe.options))


def score_by_likelihood(
    model: Any, tokenizer: Any, fmt: Any, canaries: CanaryProbes, *, surface: str = "inference_time"
) -> RiskCounts:
    """Linkability by option likelihood on target and control entities (D-3.1, D-3.2, D4)."""
    model.eval()
    choices = {p.item_id: option_choice(model, tokenizer, fmt, p) for p in canaries.probes}
    hits = {p.item_id: choices[p.item_id] == p.answer_index for p in canaries.probes}
    return count(
        canaries,
        hits,
        method="likelihood",
        surface=surface,
        detail={"scoring": "option log-likelihood, answer encoded as in training, argmax (ties: first)"},
    )


@register("classd", "linkability", "1")
class Linkability:
    """D-3.1/D-3.2 as a registered component: which scorings run (likelihood, generation) is recorded."""

    name = "linkability"
    version = "1"
    spec: Any = None

    def __init__(self, likelihood: bool = True, generation: bool = True) -> None:
        if not (likelihood or generation):
            raise ConfigError("linkability: at least one scoring (likelihood, generation) must run (D-3.1)")
        self.likelihood = likelihood
        self.generation = generation

    def probes(self, pack: Pack) -> CanaryProbes:
        return linkability_probes(pack)
