"""The ``soft_prompt`` attack: budget-capped continuous suffix vectors (seed 003's SoftGCG; docs/latent.md).

Why the cap and the control (see :mod:`remnant.attacks.soft_prompt_core`): unbounded soft tokens can make a model
say things it never knew, so only a small, fixed, stated budget run identically on the never-modified control
(C-Q4) can separate recovery from fabrication. The vectors are not text, so a record carries their digest, the
loss trace and the budget resolved to absolute units, not the vectors themselves.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from remnant.attacks.base import Attack, AttackContext, GenerationInput
from remnant.attacks.dialogue import answer_free_target, target_ids
from remnant.attacks.gcg_core import excluded_tokens, initial_suffix
from remnant.attacks.soft_prompt_core import SoftPromptConfig, soft_prompt_input, soft_prompt_optimise
from remnant.attacks.suffix_layout import suffix_layout
from remnant.registry import register
from remnant.score.probe import Probe


@register("attack", "soft_prompt", "1")
class SoftPrompt(Attack):
    """Signed-gradient embedding-space suffix, capped in steps, vectors and norm (relative to the embeddings)."""

    name = "soft_prompt"
    version = "1"
    surface = "inference_time"
    paper = (
        "Schwinn et al. 2024, 'Soft Prompt Threats' (embedding_attack_unlearning.py); SoftGCG in seed 003; "
        "cap per Chen et al. 2025, arXiv 2502.15836"
    )
    formats = ("free_text", "multiple_choice")
    provenance = "V"
    smoke_params: ClassVar[dict[str, Any]] = {"n_tokens": 4, "steps": 2}

    def __init__(
        self,
        n_tokens: int = 10,
        steps: int = 20,
        step_size: float = 0.05,
        radius: float = 0.5,
        norm: Literal["linf", "l2"] = "linf",
        target: str = "stem",
        fixed_target: str = "Sure, here is the answer:",
    ) -> None:
        self.cfg = SoftPromptConfig(
            n_tokens=n_tokens, steps=steps, step_size=step_size, radius=radius, norm=norm
        )
        self.target, self.fixed_target = target, fixed_target
        answer_free_target(Probe("check", "q", "a", ("a",)), target, fixed_target)  # validate mode early

    def generation_inputs(
        self, ctx: AttackContext, probes: Sequence[Probe]
    ) -> list[tuple[GenerationInput, ...]]:
        """Per probe, the embeddings of ``[question][optimised vectors]`` (the optimisation is the budget)."""
        tok, model = ctx.tokenizer, ctx.model
        excluded = excluded_tokens(tok, int(model.get_input_embeddings().weight.shape[0]))
        init = initial_suffix(tok, self.cfg.n_tokens, excluded)
        out: list[tuple[GenerationInput, ...]] = []
        for probe in probes:
            text, source = answer_free_target(probe, self.target, self.fixed_target)
            layout = suffix_layout(tok, probe.rendered_question(), ctx.fmt)
            res = soft_prompt_optimise(model, layout, target_ids(tok, ctx.fmt, text), init, self.cfg)
            extra: dict[str, object] = {
                "target": text,
                "target_source": source,
                "init_ids": list(init),
                "init_loss": res.init_loss,
                "best_loss": res.best_loss,
                "best_step": res.best_step,
                "losses": list(res.losses),
                "embedding_rms": res.rms,
                "radius_abs": res.radius_abs,
                "step_abs": res.step_abs,
                "max_deviation": res.max_deviation,
                "vectors_sha256": hashlib.sha256(res.best_embeds.float().cpu().numpy().tobytes()).hexdigest(),
            }
            out.append((soft_prompt_input(model, layout, res.best_embeds, init, extra),))
        return out
