"""The Goodhart arm's training objective: a registered removal method plus λ × a differentiable audit surrogate.

the J-Access paper, Test 3 trains "WD-Train", the unlearning objective plus a penalty on Jacobian-lens accessibility, and
finds the audit score falls while post-attack revival rises. Its exact penalty is in an appendix we do not have,
so the surrogates here are ours [R], chosen to be the audit's own readout made differentiable:

* **J-Access**: for each forget probe (the question of a removal item, concept tokens C_i = its answer's first
  tokens, :func:`remnant.latent.jaccess.make_probe`), the block outputs at the band layers and the last P prompt
  positions are decoded through the audit's lens (J = I, or the installed model's fitted Jacobian lens held
  fixed: :func:`remnant.latent.jacobian_lens.lens_logits`), and the surrogate is the mean over probes of a soft
  maximum (log-sum-exp) over the layers and positions of log Σ_{t∈C_i} softmax(z)_t, floored at log 1e-6 so it
  cannot run away. Lowering the concept tokens' probability mass lowers their rank, and the access test a_i
  asks whether *any* cell ranks one in the top k, hence the maximum rather than the mean.
* **UDS**: for each forget example (entity span, :mod:`remnant.latent.inputs`), the trained model's block output
  at each knowledge-encoding layer (mean Δ1 > τ between the installed and never-modified models) is patched over
  the entity span into the frozen installed model, and the surrogate is the mean entity log-probability of the
  patched forward. Lowering it makes every patch destroy the entity, so UDS reads the model as erased.

:class:`AuditPenalty` wraps a registered *loss* method; it is deliberately **not registered** (kind "method" or
any other): it exists for the study, is never offered as a removal method in an assessment, and a test checks
that no registered method is it (C-H6: a latent audit is never a removal criterion).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from remnant.engine.measurement import component_spec
from remnant.errors import ConfigError
from remnant.latent.jacobian_lens import lens_logits
from remnant.latent.patching import entity_logprob
from remnant.models.hooks import block_outputs, patch_block, prompt_batch
from remnant.registry import ComponentSpec
from remnant.train.methods.base import COMMON_DEFAULTS, LossTerms, MethodBatch, RemovalMethod, StepContext

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from remnant.latent.jaccess import Probe

Surrogate = Callable[[Any, Sequence[int]], torch.Tensor]
LOG_FLOOR = math.log(1e-6)


@dataclass
class AccessSurrogate:
    """J-Access's readout as a differentiable penalty over the forget probes (module docstring)."""

    probes: Sequence[Probe]  # aligned with the removal data's forget items
    layers: Sequence[int]
    positions: int = 8
    matrices: dict[int, torch.Tensor] | None = None  # a fixed Jacobian lens; None: the logit lens

    def __call__(self, model: PreTrainedModel, indices: Sequence[int]) -> torch.Tensor:
        terms = []
        for i in indices:
            probe = self.probes[i]
            if not probe.concept_ids:
                continue
            concepts = torch.tensor(sorted(probe.concept_ids), dtype=torch.long)
            kept = block_outputs(model, probe.prompt_ids, self.layers, detach=False)
            n = min(self.positions, len(probe.prompt_ids))
            cells = []
            for layer in self.layers:
                matrix = self.matrices[layer] if self.matrices is not None else None
                z = lens_logits(model, kept[layer][0, -n:], matrix)
                cells.append(torch.logsumexp(torch.log_softmax(z, dim=-1)[:, concepts], dim=-1))
            # a_i asks whether *any* (layer, position) ranks a concept token in the top k: a soft maximum
            terms.append(torch.clamp(torch.logsumexp(torch.cat(cells), dim=0), min=LOG_FLOOR))
        if not terms:
            return torch.zeros(())
        return torch.stack(terms).mean()


@dataclass
class PatchSurrogate:
    """UDS's stage 2 as a differentiable penalty: the frozen full model's entity log-prob under each patch."""

    full: Any  # the installed model, frozen
    examples: Sequence[
        Any
    ]  # remnant.latent.inputs.EncodedExample, aligned with the forget items (None: no span)
    layers: Sequence[int]
    _blocks: Any = field(default=None, repr=False)

    def __call__(self, model: PreTrainedModel, indices: Sequence[int]) -> torch.Tensor:
        terms = []
        for i in indices:
            ex = self.examples[i]
            if ex is None:
                continue
            ids = prompt_batch(self.full, ex.input_ids)
            window = list(range(ex.eval_start, ex.eval_end))
            kept = block_outputs(model, ex.input_ids, self.layers, detach=False)
            for layer in self.layers:
                with patch_block(self.full, layer, kept[layer], positions=window):
                    terms.append(entity_logprob(self.full(input_ids=ids).logits[0], ex))
        if not terms:
            return torch.zeros(())
        return torch.stack(terms).mean()


class AuditPenalty(RemovalMethod):
    """A registered loss method plus λ × an audit surrogate. Not registered: a study instrument only (C-H6)."""

    kind = "loss"
    formula = "L = L_base + lambda * surrogate(audit)"
    source = "the J-Access paper, Test 3 (WD-Train); surrogates [R]: remnant.studies.goodhart_objective"

    def __init__(self, base: RemovalMethod, weight: float, surrogate: Surrogate, audit: str) -> None:
        if base.kind != "loss" or base.needs_alternates is not None:
            raise ConfigError(
                f"goodhart: the base method must be a loss method without alternate answers, not "
                f"{type(base).__name__}",
                requirement="C-H6",
            )
        super().__init__(**{k: getattr(base, k) for k in COMMON_DEFAULTS})
        self.base = base
        self.weight = float(weight)
        self.surrogate = surrogate
        self.audit = audit
        self.needs_reference = base.needs_reference
        self.spec = ComponentSpec(
            kind="study_objective",
            name=f"goodhart[{audit}]",
            version="1",
            params={
                "weight": self.weight,
                "base": component_spec(base) or type(base).__name__,
            },
        )

    def setup(self, model: PreTrainedModel, ctx: StepContext) -> None:
        self.base.setup(model, ctx)

    def loss(self, model: PreTrainedModel, batch: MethodBatch, ctx: StepContext) -> LossTerms:
        terms = self.base.loss(model, batch, ctx)
        if self.weight == 0.0:
            return terms
        penalty = self.surrogate(model, batch.forget_index)
        parts = {**terms.parts, "audit_surrogate": float(penalty.detach())}
        return LossTerms(loss=terms.loss + self.weight * penalty, parts=parts)


__all__ = ["AccessSurrogate", "AuditPenalty", "PatchSurrogate"]
