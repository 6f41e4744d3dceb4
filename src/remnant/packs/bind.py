"""Binding a pack to a never-modified control model (R5, R10).

The control is asked every canary probe (probe, retain and control splits; fact items by greedy generation,
forced-choice items by option log-likelihood) and every general question. The binding records how often the
control already answers canaries (R5: must be near zero, and stated prominently when not) and keeps as the
general-utility set only the general questions the control answers correctly (R10). It is written to
``binding.json`` beside the pack; the pack digest is unchanged.

Generation and matching are the harness's own (``remnant.score``); this is the only packs module that touches
torch, and only inside functions.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from remnant.atomic import write_json
from remnant.packs.schema import Item, Pack
from remnant.score.normalise import NORMALISATION_VERSION, answer_matches

R5_NEAR_ZERO = 0.05


@dataclass(frozen=True)
class BindingReport:
    """What binding found: canary answer rate of the control (R5) and the kept general-utility set (R10).

    ``canary_rate`` is over free-form fact probes (chance ~0). Forced-choice (link) probes are counted apart
    because their chance rate is 1/options, and inference probes because their population baseline (D-4.2) is
    not zero.
    """

    pack_digest: str
    control_identity: str
    canary_probes: int
    canary_correct: int
    canary_correct_ids: tuple[str, ...]
    choice_probes: int
    choice_correct: int
    infer_probes: int
    infer_correct: int
    general_asked: int
    general_kept: tuple[str, ...]
    max_new_tokens: int
    method: str

    @property
    def canary_rate(self) -> float:
        return self.canary_correct / self.canary_probes if self.canary_probes else 0.0

    @property
    def r5_warning(self) -> str | None:
        if self.canary_rate <= R5_NEAR_ZERO:
            return None
        return (
            f"R5: the never-modified control already answers {self.canary_rate:.1%} of canary probes "
            f"({self.canary_correct}/{self.canary_probes}); canary rates are not near zero"
        )

    def to_json(self) -> dict[str, object]:
        d = asdict(self)
        d["general_utility_set"] = d.pop("general_kept")
        return {**d, "canary_rate": self.canary_rate, "r5_warning": self.r5_warning}


def _generate(model: Any, tokenizer: Any, questions: list[str], max_new_tokens: int, batch: int) -> list[str]:
    """Greedy answers to ``questions`` in the tokenizer's own prompt format (the harness's scorer)."""
    from remnant.models.prompts import PromptFormat, render_prompt_ids
    from remnant.score.capability import generate_greedy

    fmt = PromptFormat.for_tokenizer(tokenizer)
    prompts = [render_prompt_ids(tokenizer, q, fmt) for q in questions]
    return generate_greedy(model, tokenizer, prompts, max_new_tokens=max_new_tokens, batch_size=batch)


def _option_choice(model: Any, tokenizer: Any, item: Item) -> int:
    """Index of the option with the highest summed log-likelihood after the prompt (forced choice), each option
    tokenised as an answer is in the tokenizer's own prompt format (``score.kappa.choice_by_loglik``)."""
    from remnant.models.prompts import PromptFormat
    from remnant.score.kappa import choice_by_loglik
    from remnant.score.probe import Probe

    return choice_by_loglik(model, tokenizer, PromptFormat.for_tokenizer(tokenizer), Probe.from_item(item))


def bind_pack(
    pack: Pack,
    control_state: Any,
    *,
    max_new_tokens: int = 16,
    batch: int = 16,
    splits: tuple[str, ...] = ("probe", "retain", "controls"),
    limit: int | None = None,
    out_dir: str | Path | None = None,
) -> BindingReport:
    """Ask the never-modified control every canary probe and every general question (R5, R10).

    ``limit`` caps the number of canary probes asked (first ones in split order), for quick checks; the report
    records how many were asked. When ``out_dir`` is given the binding is written there as ``binding.json``.
    """
    model, tok = control_state.model, control_state.tokenizer
    model.eval()
    canaries = [it for s in splits for it in pack.split(s)]
    if limit is not None:
        canaries = canaries[:limit]
    asked = [it for it in canaries if not it.options]
    outputs = _generate(model, tok, [it.question for it in asked], max_new_tokens, batch)
    hits = {it.id for it, out in zip(asked, outputs, strict=True) if answer_matches(out, it.accepted)}
    free = [it for it in asked if it.kind == "fact"]
    correct = [it.id for it in free if it.id in hits]
    infer = [it for it in asked if it.kind == "infer"]
    infer_ok = sum(it.id in hits for it in infer)
    choice = [it for it in canaries if it.options]
    choice_ok = sum(_option_choice(model, tok, it) == it.answer_index for it in choice)
    general = pack.split("general") if "general" in pack.manifest.splits else []
    gouts = _generate(model, tok, [it.question for it in general], max_new_tokens, batch)
    kept = tuple(it.id for it, out in zip(general, gouts, strict=True) if answer_matches(out, it.accepted))
    report = BindingReport(
        pack_digest=pack.digest,
        control_identity=str(control_state.identity.digest),
        canary_probes=len(free),
        canary_correct=len(correct),
        canary_correct_ids=tuple(sorted(correct)),
        choice_probes=len(choice),
        choice_correct=int(choice_ok),
        infer_probes=len(infer),
        infer_correct=infer_ok,
        general_asked=len(general),
        general_kept=kept,
        max_new_tokens=max_new_tokens,
        method="greedy generation, normalised whole-word match of an accepted answer (normalisation "
        f"v{NORMALISATION_VERSION}); forced-choice by option log-likelihood",
    )
    if out_dir is not None:
        write_json(Path(out_dir) / "binding.json", report.to_json(), sort_keys=True)
    return report
