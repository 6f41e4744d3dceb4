"""The Jacobian lens (Gurnee et al., arXiv 2607.15495; the J-Access paper, eqs. 1–2; docs/latent.md–§2.3).

``J_l = E_{prompt, p, p' ≥ p}[∂h_T[p'] / ∂h_l[p]]``, one d×d matrix per source layer ``l < T``; readout
``lens_l(h) = W_U · norm_final(J_l h)``. The exact estimator, per prompt: truncate to ``max_seq_len``; valid
positions are ``[skip_first, len − 1)`` (attention sinks skipped; the last has no next token); hook the block
outputs, making the lowest source layer's output a grad-requiring leaf so the graph starts there (parameters
frozen); one forward on the prompt replicated ``dim_batch`` times; then ⌈d / dim_batch⌉ backward passes in which
replica ``b`` carries a one-hot cotangent at output dimension ``i0 + b`` on every valid target position at once.
Row ``i0 + b`` of ``J_l`` is that replica's gradient at layer ``l`` averaged over valid source positions — i.e.
``Σ_{p' ≥ p} ∂h_T[p', i] / ∂h_l[p, :]`` averaged over ``p`` (causality removes ``p' < p``). Prompts are
aggregated by a running mean with the convergence trace ``δ_n = mean_l ‖J̄(n) − J̄(n−1)‖_F / ‖J̄(n)‖_F``.

:func:`vjp_rows` returns ``C · J_l`` for a matrix of cotangent rows ``C``; the estimator passes the identity.

The target layer defaults to the penultimate block (``L − 2``, the paper's recipe; the last block adds noisy
artefacts) and is stored with the lens. Lenses are cached per model digest, prompt set and layer set, and each
prompt's J on its own (the prompt mean is exact over shards), so fitting on more prompts costs only the new ones.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from remnant.errors import ConfigError
from remnant.latent.cache import DigestCache, digest_inputs, model_digest
from remnant.models.arch import resolve_parts
from remnant.models.grads import grad_required
from remnant.models.hooks import block_hidden, with_hidden

if TYPE_CHECKING:
    from transformers import PreTrainedModel

LENS_KIND = "jacobian-lens"
SHARD_KIND = "jacobian-lens-prompt"


@dataclass(frozen=True)
class LensConfig:
    """Estimator settings (defaults: the reference's; ``dim_batch`` only trades memory for passes)."""

    source_layers: tuple[int, ...] | None = None
    target_layer: int | None = None
    max_seq_len: int = 128
    skip_first: int = 16
    dim_batch: int = 8

    def resolve(self, model: PreTrainedModel) -> tuple[list[int], int]:
        n = len(resolve_parts(model).blocks)
        target = self.target_layer if self.target_layer is not None else n - 2
        if not 0 < target < n:
            raise ConfigError(
                f"jacobian lens: target_layer {target} must lie in [1, {n - 1}] (docs/latent.md)"
            )
        sources = list(self.source_layers) if self.source_layers is not None else list(range(target))
        if not sources or any(not 0 <= s < target for s in sources):
            raise ConfigError(f"jacobian lens: source layers {sources} must lie below target layer {target}")
        return sorted(set(sources)), target


@dataclass(frozen=True)
class JacobianLens:
    """Fitted lens: one matrix per source layer, the target layer, and how it was fitted."""

    matrices: dict[int, torch.Tensor]
    target_layer: int
    n_prompts: int
    model: str
    key: str
    deltas: tuple[float, ...]


class _Stop(Exception):
    """Raised by the target-layer hook: nothing after block T is needed."""


def _forward_graph(
    model: PreTrainedModel, ids: torch.Tensor, sources: Sequence[int], target: int
) -> tuple[dict[int, torch.Tensor], torch.Tensor]:
    """Block outputs of ``sources`` (graph from the lowest one) and of ``target``, for a [B, T] batch."""
    blocks = resolve_parts(model).blocks
    lowest = min(sources)
    captured: dict[int, torch.Tensor] = {}
    handles = []

    def make(layer: int) -> Any:
        def hook(_m: Any, _i: Any, out: Any) -> Any:
            h = block_hidden(out)
            if layer == lowest:
                h = h.detach().float().requires_grad_(True)
                captured[layer] = h
                return with_hidden(out, h.to(block_hidden(out).dtype))
            captured[layer] = h
            if layer == target:
                raise _Stop
            return None

        return hook

    for layer in sorted({*sources, target}):
        handles.append(blocks[layer].register_forward_hook(make(layer)))
    try:
        with torch.enable_grad():
            model(input_ids=ids)
    except _Stop:
        pass
    finally:
        for h in handles:
            h.remove()
    return {s: captured[s] for s in sources}, captured[target]


def vjp_rows(
    model: PreTrainedModel,
    ids: Sequence[int],
    cotangents: torch.Tensor,
    sources: Sequence[int],
    target: int,
    cfg: LensConfig,
) -> dict[int, torch.Tensor] | None:
    """``C · J_l`` on one prompt for each source layer (rows of ``C`` are cotangents over h_T's d dims).

    None when the prompt has no valid position. One forward, ⌈n / dim_batch⌉ backward passes.
    """
    ids = list(ids)[: cfg.max_seq_len]
    valid = list(range(cfg.skip_first, len(ids) - 1))
    if not valid:
        return None
    b = cfg.dim_batch
    batch = torch.tensor([ids], dtype=torch.long).expand(b, -1)
    with grad_required(list(model.parameters()), False):
        states, h_t = _forward_graph(model, batch, sources, target)
        n, d = cotangents.shape
        out = {s: torch.zeros(n, states[s].shape[-1]) for s in sources}
        inputs = [states[s] for s in sources]
        for i0 in range(0, n, b):
            rows = min(b, n - i0)
            cot = torch.zeros(h_t.shape, dtype=h_t.dtype)
            cot[:rows, valid, :] = cotangents[i0 : i0 + rows, None, :].to(h_t.dtype)
            grads = torch.autograd.grad(h_t, inputs, cot, retain_graph=i0 + b < n, allow_unused=True)
            for s, g in zip(sources, grads, strict=True):
                if g is not None:
                    out[s][i0 : i0 + rows] = g[:rows, valid].float().mean(dim=1)
    return out


def _running_mean(
    prompts: Sequence[Sequence[int]], rows_of: Callable[[Sequence[int]], dict[int, torch.Tensor] | None]
) -> tuple[dict[int, torch.Tensor], int, list[float]]:
    mean: dict[int, torch.Tensor] = {}
    count = 0
    deltas: list[float] = []
    for ids in prompts:
        rows = rows_of(ids)
        if rows is None:
            continue
        count += 1
        if not mean:
            mean = {s: r.clone() for s, r in rows.items()}
            continue
        changes = []
        for s in mean:
            before = mean[s].clone()
            mean[s] += (rows[s] - mean[s]) / count
            changes.append(float(torch.linalg.norm(mean[s] - before) / (torch.linalg.norm(mean[s]) + 1e-30)))
        deltas.append(sum(changes) / len(changes))
    if count == 0:
        raise ConfigError(
            "jacobian lens: no prompt has a valid position (longer prompts or a smaller skip_first)"
        )
    return mean, count, deltas


def _key(
    digest: str, prompts: Sequence[Sequence[int]], sources: list[int], target: int, cfg: LensConfig
) -> str:
    return digest_inputs(
        {
            "kind": LENS_KIND,
            "model": digest,
            "prompts": [list(p)[: cfg.max_seq_len] for p in prompts],
            "sources": sources,
            "target": target,
            "skip_first": cfg.skip_first,
        }
    )


def fit_lens(
    model: PreTrainedModel,
    prompts: Sequence[Sequence[int]],
    cfg: LensConfig | None = None,
    *,
    cache_dir: Path | str | None = None,
    digest: str | None = None,
) -> JacobianLens:
    """Fit (or read from the cache) the Jacobian lens of ``model`` on token-id ``prompts``."""
    cfg = cfg or LensConfig()
    sources, target = cfg.resolve(model)
    mdigest = model_digest(model, digest)
    key = _key(mdigest, prompts, sources, target, cfg)
    cache = DigestCache(cache_dir) if cache_dir is not None else None
    if cache is not None:
        tensors = cache.get_tensors(LENS_KIND, key)
        meta = cache.get_json(LENS_KIND, key)
        if tensors is not None and meta is not None:
            mats = {s: tensors[f"J.{s}"] for s in sources}
            return JacobianLens(mats, target, int(meta["n_prompts"]), mdigest, key, tuple(meta["deltas"]))
    d = _hidden_size(model)
    if d <= 0:
        raise ConfigError("jacobian lens: cannot read the hidden size from the model config")
    eye = torch.eye(d)

    def shard(ids: Sequence[int]) -> dict[int, torch.Tensor] | None:
        """One prompt's J, cached on its own: a lens on more prompts reuses every prompt already fitted."""
        if cache is None:
            return vjp_rows(model, ids, eye, sources, target, cfg)
        skey = _key(mdigest, [ids], sources, target, cfg)
        got = cache.get_tensors(SHARD_KIND, skey)
        if got is not None:
            return {s: got[f"J.{s}"] for s in sources}
        rows = vjp_rows(model, ids, eye, sources, target, cfg)
        if rows is not None:
            cache.put_tensors(
                SHARD_KIND, skey, {f"J.{s}": m for s, m in rows.items()}, {"target": str(target)}
            )
        return rows

    mats, count, deltas = _running_mean(prompts, shard)
    lens = JacobianLens(mats, target, count, mdigest, key, tuple(deltas))
    if cache is not None:
        cache.put_tensors(LENS_KIND, key, {f"J.{s}": m for s, m in mats.items()}, {"target": str(target)})
        cache.put_json(
            LENS_KIND, key, {"n_prompts": count, "deltas": deltas, "target": target, "sources": sources}
        )
    return lens


def _hidden_size(model: PreTrainedModel) -> int:
    config = getattr(model, "config", None)
    text = getattr(config, "text_config", None) or config
    for name in ("hidden_size", "n_embd", "d_model"):
        value = getattr(text, name, None)
        if isinstance(value, int):
            return value
    return 0


def lens_logits(model: PreTrainedModel, h: torch.Tensor, matrix: torch.Tensor | None = None) -> torch.Tensor:
    """Vocabulary logits ``W_U · norm_final(J h)`` for rows ``h`` [n, d] *with* gradients (the Goodhart arm's
    J-Access surrogate trains through it); ``matrix=None`` is the logit lens.

    A final-logit softcap (Gemma) is monotonic, so it is not applied: ranks are unchanged.
    """
    parts = resolve_parts(model)
    dtype = next(model.parameters()).dtype
    x = h.float() @ matrix.float().T if matrix is not None else h.float()
    logits: torch.Tensor = parts.unembed(parts.final_norm(x.to(dtype))).float()
    return logits


@torch.no_grad()
def readout(model: PreTrainedModel, h: torch.Tensor, matrix: torch.Tensor | None = None) -> torch.Tensor:
    """:func:`lens_logits` without gradients, as an audit reads: vocabulary logits ``W_U · norm_final(J h)`` for
    rows ``h`` [n, d]; ``matrix=None`` is the logit lens."""
    return lens_logits(model, h, matrix)


__all__ = [
    "JacobianLens",
    "LensConfig",
    "fit_lens",
    "lens_logits",
    "readout",
    "vjp_rows",
]
