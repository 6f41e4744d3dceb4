"""Greedy Coordinate Gradient (Zou et al. 2023), written here after nanoGCG v0.3.0's algorithm (docs/latent.md).

One step: the gradient of the target loss with respect to a one-hot encoding of the suffix ranks, per position,
the ``topk`` substitutions that most lower the loss to first order; ``search_width`` candidates each swap
``n_replace`` random positions for random picks from those lists; every candidate's exact loss is computed in
batches and the suffix moves to the best one. The best suffix over all steps is kept.

Excluded tokens (§4.7 pitfalls, and what nanoGCG misses): special and added tokens, ids at or past
``tokenizer.vocab_size`` and padded embedding rows, tokens that decode to non-ASCII or non-printable text or to
nothing, and tokens that do not survive a decode→encode round trip alone. Whole candidates must also round-trip
(``filter_ids``), so the recorded suffix string reproduces the ids that were scored.

The target is an answer-free string (an answer stem such as "Zorvak Telumi is from"), never the ground truth:
optimising towards the answer proves nothing (Chen et al. 2025; §4.7 "Unlearning use"). The caller checks that.
Randomness comes only from the ``torch.Generator`` passed in (no global seeding), so the same seed gives the
same suffix on the control and on the post-removal model's run (C-Q4).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch.nn import functional as F

from remnant.attacks.suffix_layout import SuffixLayout
from remnant.errors import ModelError
from remnant.models.forward_keywords import cache_kwarg, keep_last_logits, output_cache

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


@dataclass(frozen=True)
class GCGConfig:
    """GCG budget. CPU-sized defaults (nanoGCG: 250 steps, width 512, top-k 256; §4.7 advises 64–128 on CPU)."""

    suffix_len: int = 10
    steps: int = 20
    search_width: int = 64
    topk: int = 64
    n_replace: int = 1
    batch_size: int = 64
    filter_ids: bool = True
    use_prefix_cache: bool = True


@dataclass(frozen=True)
class GCGResult:
    """The best suffix found, its loss, and the trace (``losses[s]`` = best candidate loss at step ``s``)."""

    best_ids: tuple[int, ...]
    best_loss: float
    init_ids: tuple[int, ...]
    init_loss: float
    losses: tuple[float, ...]
    best_step: int
    empty_steps: int


def embed_scale(embed: torch.nn.Module) -> float:
    """Multiplier some families (Gemma) apply inside the embedding module, so one-hot @ W matches it."""
    scale = getattr(embed, "embed_scale", None)
    if scale is None:
        return 1.0
    return float(scale.item()) if isinstance(scale, torch.Tensor) else float(scale)


def excluded_tokens(tokenizer: Any, vocab_rows: int, *, allow_non_ascii: bool = False) -> torch.Tensor:
    """Boolean mask over the embedding rows: True where GCG may never place a token (module docstring)."""
    excluded = torch.zeros(vocab_rows, dtype=torch.bool)
    n_tok = min(len(tokenizer), vocab_rows)
    excluded[n_tok:] = True  # padded embedding rows no tokenizer id maps to
    excluded[min(int(tokenizer.vocab_size), vocab_rows) :] = True  # Llama-3-style specials past vocab_size
    specials = set(int(i) for i in tokenizer.all_special_ids)
    specials |= set(int(i) for i in getattr(tokenizer, "added_tokens_decoder", {}))
    for i in specials:
        if 0 <= i < vocab_rows:
            excluded[i] = True
    ids = list(range(n_tok))
    texts = tokenizer.batch_decode([[i] for i in ids], skip_special_tokens=False)
    back = tokenizer(texts, add_special_tokens=False)["input_ids"]
    for i, text, re_ids in zip(ids, texts, back, strict=True):
        printable = text.isascii() and text.isprintable()
        if not text or (not allow_non_ascii and not printable) or list(re_ids) != [i]:
            excluded[i] = True
    return excluded


def initial_suffix(tokenizer: PreTrainedTokenizerBase, length: int, excluded: torch.Tensor) -> list[int]:
    """``length`` copies of the first allowed single token among " x", "x", " !", "!" (nanoGCG starts from x's)."""
    for text in (" x", "x", " !", "!"):
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        if len(ids) == 1 and not bool(excluded[int(ids[0])]):
            return [int(ids[0])] * length
    allowed = (~excluded).nonzero()
    if len(allowed) == 0:
        raise ModelError("every token is excluded; GCG has nothing to search over")
    return [int(allowed[0])] * length


def round_trips(tokenizer: PreTrainedTokenizerBase, ids: Sequence[int]) -> bool:
    """True when decoding ``ids`` and encoding the text again gives the same ids (nanoGCG ``filter_ids``)."""
    text = tokenizer.decode(list(ids), skip_special_tokens=False)
    return [int(t) for t in tokenizer(text, add_special_tokens=False)["input_ids"]] == list(ids)


class SuffixObjective:
    """Target cross-entropy of ``[before][suffix][after][target]`` for one-hot or id suffixes (batched)."""

    def __init__(
        self, model: Any, layout: SuffixLayout, target_ids: Sequence[int], *, use_prefix_cache: bool
    ) -> None:
        if not target_ids:
            raise ModelError("GCG needs a non-empty target")
        self.model = model
        self.embed = model.get_input_embeddings()
        self.scale = embed_scale(self.embed)
        self.device = self.embed.weight.device
        self.target = torch.tensor([list(target_ids)], dtype=torch.long, device=self.device)
        with torch.no_grad():
            self.before = self.embed(self.ids_tensor(layout.before))
            self.after = self.embed(self.ids_tensor(layout.after))
            self.target_emb = self.embed(self.target)
        self.cache: Any = None
        # only the target positions need logits: skips most of the unembedding (49k-wide on SmolLM2)
        self.keep: dict[str, object] = dict(keep_last_logits(model, len(target_ids) + 1))
        self.cache_kw = cache_kwarg(model) or "past_key_values"
        if use_prefix_cache and layout.before:
            with torch.no_grad():
                out = model(inputs_embeds=self.before, use_cache=True)
            self.cache = output_cache(out)

    def ids_tensor(self, ids: Sequence[int]) -> torch.Tensor:
        return torch.tensor([list(ids)], dtype=torch.long, device=self.device)

    def loss_of_embeds(self, suffix_emb: torch.Tensor) -> torch.Tensor:
        """Per-row mean target CE for suffix embeddings of shape [B, L, d]."""
        b = suffix_emb.shape[0]
        suffix_emb = suffix_emb.to(self.before.dtype)  # soft prompts optimise in fp32 on a bf16 model
        rest = [suffix_emb, self.after.expand(b, -1, -1), self.target_emb.expand(b, -1, -1)]
        if self.cache is None:
            embeds = torch.cat([self.before.expand(b, -1, -1), *rest], dim=1)
            logits = self.model(inputs_embeds=embeds, **self.keep).logits
        else:
            cache = copy.deepcopy(self.cache)  # the forward appends to it; the prefix is reused every call
            if b > 1:
                cache.batch_repeat_interleave(b)
            kwargs = {self.cache_kw: cache, **self.keep}
            logits = self.model(inputs_embeds=torch.cat(rest, dim=1), **kwargs).logits
        n_t = self.target.shape[1]
        pred = logits[:, -n_t - 1 : -1]
        pred = pred.to(torch.promote_types(pred.dtype, torch.float32))  # bf16 logits: CE in fp32
        tgt = self.target.expand(b, -1)
        return F.cross_entropy(pred.transpose(1, 2), tgt, reduction="none").mean(dim=1)

    def token_gradient(self, suffix: Sequence[int]) -> tuple[torch.Tensor, float]:
        """∂loss/∂one-hot(suffix), shape [L, V], and the suffix's loss (model parameters get no .grad)."""
        weight = self.embed.weight
        one_hot = torch.zeros(len(suffix), weight.shape[0], dtype=weight.dtype, device=self.device)
        one_hot[torch.arange(len(suffix)), self.ids_tensor(suffix)[0]] = 1.0
        one_hot.requires_grad_(True)
        loss = self.loss_of_embeds(((one_hot @ weight) * self.scale).unsqueeze(0))[0]
        (grad,) = torch.autograd.grad(loss, [one_hot])
        return grad, float(loss.detach())

    @torch.no_grad()
    def losses(self, candidates: torch.Tensor, batch_size: int) -> torch.Tensor:
        """Exact losses of id suffixes ``candidates`` [N, L], computed ``batch_size`` at a time."""
        out = [
            self.loss_of_embeds(self.embed(candidates[s : s + batch_size].to(self.device)))
            for s in range(0, candidates.shape[0], batch_size)
        ]
        return torch.cat(out)


def sample_candidates(
    suffix: torch.Tensor,
    grad: torch.Tensor,
    excluded: torch.Tensor,
    cfg: GCGConfig,
    generator: torch.Generator,
) -> torch.Tensor:
    """``search_width`` suffixes, each with ``n_replace`` positions swapped for one of their top-k tokens.

    Sampling runs on the CPU with a CPU generator, so the same seed draws the same swaps on any device.
    """
    grad = grad.detach().float().cpu().clone()
    grad[:, excluded] = float("inf")
    top = (-grad).topk(min(cfg.topk, int((~excluded).sum())), dim=1).indices  # [L, k]
    width, length = cfg.search_width, suffix.shape[0]
    positions = torch.rand(width, length, generator=generator).argsort(dim=1)[:, : cfg.n_replace]
    picks = torch.randint(0, top.shape[1], (width, cfg.n_replace), generator=generator)
    candidates = suffix.cpu().repeat(width, 1)
    candidates.scatter_(1, positions, top[positions, picks])
    return candidates


def gcg_optimise(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    layout: SuffixLayout,
    target_ids: Sequence[int],
    cfg: GCGConfig,
    generator: torch.Generator,
    excluded: torch.Tensor,
) -> GCGResult:
    """Run GCG for ``cfg.steps`` steps and return the lowest-loss suffix seen (module docstring)."""
    objective = SuffixObjective(model, layout, target_ids, use_prefix_cache=cfg.use_prefix_cache)
    init = initial_suffix(tokenizer, cfg.suffix_len, excluded)
    current = torch.tensor(init)
    init_loss = float(objective.losses(current.unsqueeze(0), 1)[0])
    best_ids, best_loss, best_step = tuple(init), init_loss, -1
    losses: list[float] = []
    empty = 0
    for step in range(cfg.steps):
        grad, loss_now = objective.token_gradient(current.tolist())
        candidates = sample_candidates(current, grad, excluded, cfg, generator)
        if cfg.filter_ids:
            keep = [i for i, c in enumerate(candidates.tolist()) if round_trips(tokenizer, c)]
            if not keep:  # nothing expressible as text this step: stay put, and say so
                empty += 1
                losses.append(loss_now)
                continue
            candidates = candidates[keep]
        cand_losses = objective.losses(candidates, cfg.batch_size).cpu()
        idx = int(cand_losses.argmin())
        current = candidates[idx]
        losses.append(float(cand_losses[idx]))
        if losses[-1] < best_loss:
            best_ids, best_loss, best_step = tuple(int(t) for t in current), losses[-1], step
    return GCGResult(
        best_ids=best_ids,
        best_loss=best_loss,
        init_ids=tuple(init),
        init_loss=init_loss,
        losses=tuple(losses),
        best_step=best_step,
        empty_steps=empty,
    )
