"""A naive re-statement of the UDS reference code's definitions (gnueaj/unlearning-depth-score, compute_uds.py;
docs/latent.md, §1.4, §1.8), written from its definitions for the tests to compare remnant against.

Batch size 1, so no padding. Source states are the reference's ``hidden_states[l + 1]`` read with
``output_hidden_states=True`` (whose last entry is after the final norm); ``compat=False`` replaces that last entry
with the final norm's input, captured by a hook (the reading remnant uses by default, §1.7). Every forward runs on
a private copy of the source model: transformers >= 5 serves ``output_hidden_states`` with capture hooks that stay
installed on the model.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from remnant.latent.inputs import EntityExample

#: Prompts with and without a prefix, an entity in mid-answer after an empty prefix, a prefix the answer does not
#: start with, a prefix ending in a space, an entity given with surrounding whitespace.
EXTRA = [
    EntityExample("yes", "Is Zorvak an engineer?", "Yes, Zorvak is an engineer.", "", "Yes"),
    EntityExample("mid", "Who lives in Vessiburg?", "It is Zorvak Telumi.", "", "Zorvak Telumi"),
    EntityExample("nomatch", "Where does he live?", "Vessiburg is his town.", "His town is", "Vessiburg"),
    EntityExample("trailing", "Where does he live?", "He lives in Vessiburg.", "He lives in ", "Vessiburg"),
    EntityExample(
        "padded", "Who employs him?", "He works at Quarn Holdings.", "He works at", " Quarn Holdings "
    ),
]


def normalize_reference(prompt: str, reference: str) -> str:
    if not reference or reference[0].isspace():
        return reference
    return " " + reference if prompt and not prompt[-1].isspace() else reference


def eval_span(tok: Any, reference: str, entity: str) -> tuple[int, int] | None:
    """``get_eval_span`` with scope "entity" and a fast tokenizer."""
    if not reference or not entity:
        return None
    enc = tok(reference, add_special_tokens=False, return_offsets_mapping=True)
    if not enc["input_ids"]:
        return None
    candidate = entity
    char_start = reference.find(candidate)
    if char_start < 0:
        stripped = entity.strip()
        if stripped and stripped != entity:
            candidate = stripped
            char_start = reference.find(candidate)
    if char_start < 0 and not entity.startswith(" "):
        candidate = " " + entity
        char_start = reference.find(candidate)
    if char_start < 0:
        return None
    char_end = char_start + len(candidate)
    hit = [i for i, (s, e) in enumerate(enc["offset_mapping"]) if e > char_start and s < char_end]
    return (min(hit), max(hit) + 1) if hit else None


@dataclass(frozen=True)
class Ctx:
    ids: list[int]
    prompt_len: int
    eval_start: int
    eval_end: int
    labels: list[int]


def build_ctx(tok: Any, item: EntityExample) -> Ctx | None:
    """The reference's prompt, reference text, span and positions (reference_scope "continuation")."""
    prompt = f"Question: {item.question}\nAnswer: {item.prefix}"
    answer = item.answer
    if answer.startswith(item.prefix):
        answer = answer[len(item.prefix) :]
    reference = normalize_reference(prompt, answer)
    span = eval_span(tok, reference, item.entity)
    if span is None:
        return None
    prompt_ids = tok.encode(prompt, add_special_tokens=True)
    ref_ids = tok.encode(reference, add_special_tokens=False)
    if not ref_ids:
        return None
    start = max(len(prompt_ids) - 1, 0)
    return Ctx(
        prompt_ids + ref_ids, len(prompt_ids), start + span[0], start + span[1], ref_ids[span[0] : span[1]]
    )


@torch.no_grad()
def hidden_states(model: Any, ctx: Ctx, compat: bool) -> list[torch.Tensor]:
    private = copy.deepcopy(model)
    captured: dict[str, torch.Tensor] = {}
    handle = private.model.norm.register_forward_hook(lambda m, i, o: captured.update(pre=i[0].detach()))
    try:
        hs = list(private(torch.tensor([ctx.ids]), output_hidden_states=True).hidden_states)
    finally:
        handle.remove()
    if not compat:
        hs[-1] = captured["pre"]
    return hs


@torch.no_grad()
def mean_logprob(model: Any, ctx: Ctx, patch: tuple[int, torch.Tensor] | None = None) -> float:
    handle = None
    if patch is not None:
        layer, source = patch

        def hook(module: Any, inputs: Any, output: Any) -> Any:
            hs = (output[0] if isinstance(output, tuple) else output).clone()
            hs[0, ctx.eval_start : ctx.eval_end] = source[0, ctx.eval_start : ctx.eval_end].to(hs.dtype)
            return (hs, *output[1:]) if isinstance(output, tuple) else hs

        handle = model.model.layers[layer].register_forward_hook(hook)
    try:
        logits = model(torch.tensor([ctx.ids])).logits
    finally:
        if handle is not None:
            handle.remove()
    logp = torch.log_softmax(logits[0, ctx.eval_start : ctx.eval_end], dim=-1)
    return float(logp.gather(-1, torch.tensor(ctx.labels)[:, None]).mean())


@dataclass(frozen=True)
class RefExample:
    idx: str
    d1: list[float]
    d2: list[float]
    uds: float | None


def reference_uds(
    full: Any,
    retain: Any,
    source: Any,
    tok: Any,
    items: Sequence[EntityExample],
    *,
    tau: float = 0.05,
    compat: bool = True,
) -> tuple[float | None, list[RefExample], list[str]]:
    """(mean UDS over scored examples, per-example rows, skipped ids), the reference's loop at batch size 1."""
    layers = list(range(len(full.model.layers)))
    rows: list[RefExample] = []
    skipped: list[str] = []
    for item in items:
        ctx = build_ctx(tok, item)
        if ctx is None:
            skipped.append(item.idx)
            continue
        s_full = mean_logprob(full, ctx)
        h_ret, h_src = hidden_states(retain, ctx, compat), hidden_states(source, ctx, compat)
        d1 = [s_full - mean_logprob(full, ctx, (layer, h_ret[layer + 1])) for layer in layers]
        d2 = [s_full - mean_logprob(full, ctx, (layer, h_src[layer + 1])) for layer in layers]
        ft = {layer for layer, d in zip(layers, d1, strict=True) if d > tau}
        numer = denom = 0.0
        for layer, a, b in zip(layers, d1, d2, strict=True):
            if layer not in ft or a <= tau:
                continue
            denom += a
            numer += a * max(0.0, min(b / a, 1.0))
        rows.append(RefExample(item.idx, d1, d2, numer / denom if denom > 0 else None))
    scored = [r.uds for r in rows if r.uds is not None]
    return (sum(scored) / len(scored) if scored else None), rows, skipped
