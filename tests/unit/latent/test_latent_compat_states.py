"""``uds_compat`` source states equal the reference's ``hidden_states[l + 1]`` without leaving hooks (§1.7).

The reference reads ``output_hidden_states=True``; transformers >= 5 serves that by installing permanent capture
hooks on every block, so the compat path rebuilds the same tensors from remnant's own removable hooks.
"""

from __future__ import annotations

from pathlib import Path

import torch
from _latent_tiny import EXAMPLES

from remnant.latent.inputs import encode_example
from remnant.latent.patching import source_states_many
from remnant.models import load_model
from remnant.models.arch import resolve_parts


def _hook_count(model: torch.nn.Module) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


def test_compat_states_equal_hidden_states_and_leave_no_hooks(tiny_llama_dir: Path) -> None:
    state = load_model(tiny_llama_dir)  # a private copy: the reference call below hooks it for good
    model = state.model
    enc = encode_example(state.tokenizer, EXAMPLES[0], "raw")
    assert enc is not None
    layers = list(range(len(resolve_parts(model).blocks)))
    with torch.no_grad():
        compat = source_states_many(model, [enc], layers, uds_compat=True)[0]
        plain = source_states_many(model, [enc], layers)[0]
    assert _hook_count(model) == 0
    window = slice(enc.eval_start, enc.eval_end)
    with torch.no_grad():
        hs = model(input_ids=torch.tensor([list(enc.input_ids)]), output_hidden_states=True).hidden_states
    assert _hook_count(model) > 0  # the transformers behaviour the compat path avoids
    for layer in layers:
        assert torch.equal(compat[layer], hs[layer + 1][0, window].float())
    assert torch.equal(compat[0], plain[0])  # earlier blocks: the block output itself
    assert (compat[layers[-1]] - plain[layers[-1]]).abs().max() > 1e-2  # last: after the final norm
