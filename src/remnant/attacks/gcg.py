"""The ``gcg`` attack: an adversarial suffix optimised per probe towards an answer-free target (§4.3; seed 003).

The algorithm is :mod:`remnant.attacks.gcg_core`; this module picks the target (the pack's answer stem, else a
fixed affirmative), seeds the search from the context's seed and the item id (the same on every state, C-Q4),
then greedy-generates from ``[question][suffix]`` — without the target, which the model must produce itself —
and scores the generation like every other attack.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from remnant.attacks.base import Attack, AttackContext, GenerationInput
from remnant.attacks.dialogue import answer_free_target, target_ids
from remnant.attacks.gcg_core import GCGConfig, excluded_tokens, gcg_optimise
from remnant.attacks.suffix_layout import suffix_layout
from remnant.errors import ConfigError
from remnant.registry import register
from remnant.score.probe import Probe


@register("attack", "gcg", "1")
class GCG(Attack):
    """Greedy Coordinate Gradient suffix attack with CPU-sized budgets and answer-free targets."""

    name = "gcg"
    version = "1"
    surface = "inference_time"
    paper = "Zou et al. 2023, arXiv 2307.15043 (algorithm as nanoGCG v0.3.0); audit use: seed 003"
    formats = ("free_text", "multiple_choice")
    provenance = "V"
    smoke_params: ClassVar[dict[str, Any]] = {
        "suffix_len": 4,
        "steps": 2,
        "search_width": 8,
        "topk": 8,
        "batch_size": 8,
    }

    def __init__(
        self,
        suffix_len: int = 10,
        steps: int = 20,
        search_width: int = 64,
        topk: int = 64,
        n_replace: int = 1,
        batch_size: int = 64,
        target: str = "stem",
        fixed_target: str = "Sure, here is the answer:",
        filter_ids: bool = True,
        allow_non_ascii: bool = False,
    ) -> None:
        if min(suffix_len, search_width, topk, n_replace, batch_size) < 1 or steps < 0:
            raise ConfigError("gcg: suffix_len, search_width, topk, n_replace, batch_size must be ≥ 1")
        if n_replace > suffix_len:
            raise ConfigError("gcg: n_replace cannot exceed suffix_len")
        self.cfg = GCGConfig(
            suffix_len=suffix_len,
            steps=steps,
            search_width=search_width,
            topk=topk,
            n_replace=n_replace,
            batch_size=batch_size,
            filter_ids=filter_ids,
        )
        self.target, self.fixed_target = target, fixed_target
        self.allow_non_ascii = allow_non_ascii
        answer_free_target(Probe("check", "q", "a", ("a",)), target, fixed_target)  # validate mode early

    def generation_inputs(
        self, ctx: AttackContext, probes: Sequence[Probe]
    ) -> list[tuple[GenerationInput, ...]]:
        """Per probe, ``[question][best suffix]`` after the seeded search (the search is the budget)."""
        tok = ctx.tokenizer
        rows = int(ctx.model.get_input_embeddings().weight.shape[0])
        excluded = excluded_tokens(tok, rows, allow_non_ascii=self.allow_non_ascii)
        out: list[tuple[GenerationInput, ...]] = []
        for probe in probes:
            text, source = answer_free_target(probe, self.target, self.fixed_target)
            layout = suffix_layout(tok, probe.rendered_question(), ctx.fmt)
            seed = ctx.derive_seed(self.name, probe.item_id)
            res = gcg_optimise(
                ctx.model,
                tok,
                layout,
                target_ids(tok, ctx.fmt, text),
                self.cfg,
                ctx.generator(self.name, probe.item_id, device="cpu"),
                excluded,
            )
            extra: dict[str, object] = {
                "target": text,
                "target_source": source,
                "suffix": tok.decode(list(res.best_ids)),
                "suffix_ids": list(res.best_ids),
                "init_loss": res.init_loss,
                "best_loss": res.best_loss,
                "best_step": res.best_step,
                "losses": list(res.losses),
                "empty_steps": res.empty_steps,
                "excluded_tokens": int(excluded.sum()),
                "seed": seed,
            }
            out.append((GenerationInput(tuple(layout.prompt_ids(res.best_ids)), extra=extra),))
        return out
