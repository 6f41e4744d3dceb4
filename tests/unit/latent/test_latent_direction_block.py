"""Direction survival (Annex B.3), its latent figures in the statement's block (C-H6, C-H7) and the audit registry."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from _latent_tiny import EXAMPLES, mix

from remnant import registry
from remnant.latent.block import direction_figures, result_figure
from remnant.latent.direction import DirectionConfig, direction_survival
from remnant.latent.inputs import encode_example
from remnant.latent.uds import score_source, stage1, uds
from remnant.statement.latent import Entry, assemble_block
from remnant.statement.schema import LatentBlock


def _prompts(tok: Any) -> list[list[int]]:
    out = []
    for ex in EXAMPLES:
        enc = encode_example(tok, ex, "raw")
        assert enc is not None
        out.append(list(enc.input_ids[: enc.prompt_len]))
    return out


@pytest.fixture(scope="module")
def four_layer() -> tuple[Any, Any]:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=60,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=5,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    with torch.random.fork_rng(devices=[]):
        torch.random.manual_seed(3)
        base = LlamaForCausalLM(config).eval()
        other = LlamaForCausalLM(config).eval()
    return base, mix(base, other, 0.3)


def test_installed_reads_one_never_modified_zero(latent_states: dict[str, Any]) -> None:
    s = latent_states
    states = {
        "removed": mix(s["full"], s["retain"], 0.5),
        "procedure": copy.deepcopy(s["retain"]),  # a control that did not move
        "content": copy.deepcopy(s["full"]),  # a control that moved exactly like the install (Annex B.6)
    }
    roles = {"removed": "removed", "procedure": "procedure_control", "content": "content_control"}
    cfg = DirectionConfig(layers=(0, 1), n_resamples=200, n_permutations=100, seed=5)
    res = direction_survival(s["retain"], s["full"], states, roles, _prompts(s["tokenizer"]), cfg)
    assert res.controls_run and not res.grid_met  # two layers only: the C-H4 grid is not met, and it says so
    assert len(res.signatures) == 4 and any(g.magnitude > g.permutation_floor > 0 for g in res.signatures)
    by = {(f.state, f.layer, f.position): f for f in res.figures}
    for layer in (0, 1):
        for pos in ("last", "mean"):
            inst = by[("installed", layer, pos)]
            assert inst.survival == pytest.approx(1.0) and inst.within_margin is None
            proc = by[("procedure", layer, pos)]
            assert proc.survival == pytest.approx(0.0, abs=1e-12) and proc.within_margin is True
            cont = by[("content", layer, pos)]
            assert cont.survival == pytest.approx(1.0) and cont.within_margin is False
            rem = by[("removed", layer, pos)]
            assert rem.ci95[0] <= rem.survival <= rem.ci95[1]
            assert rem.within_margin is None


def test_default_grid_is_three_layers_two_positions(four_layer: tuple[Any, Any]) -> None:
    base, inst = four_layer
    prompts = [[1, 5, 9, 11, 3], [2, 2, 7, 40], [8, 6, 59, 1, 1, 4], [10, 20, 30]]
    res = direction_survival(base, inst, {}, {}, prompts, DirectionConfig(n_resamples=100, n_permutations=50))
    assert res.layers == [1, 2, 3] and res.positions == ["last", "mean"] and res.grid_met
    assert not res.controls_run
    assert direction_figures(res) == []  # only the installed model was read: nothing to report against it
    block = assemble_block([Entry("direction survival", "", None)])
    assert not block.controls_run and "were not run for direction survival" in block.controls_statement
    assert "cannot be interpreted as being about the target" in block.controls_statement


def test_block_from_uds_and_direction(latent_states: dict[str, Any]) -> None:
    s = latent_states
    s1 = stage1(s["full"], s["retain"], s["tokenizer"], EXAMPLES)
    removed = mix(s["full"], s["retain"], 0.5)
    uds = [
        ("post_removal", "removed", score_source(s["full"], removed, s1)),
        ("procedure", "procedure_control", score_source(s["full"], s["retain"], s1)),
        ("content", "content_control", score_source(s["full"], s["full"], s1)),
    ]
    block = assemble_block([Entry("UDS", role, result_figure(state, r)) for state, role, r in uds])
    assert isinstance(block, LatentBlock) and block.adjudicating is False and block.controls_run
    fig = block.figures[0]
    assert fig.name == "uds" and fig.states == ["post_removal", "full", "retain"]
    assert "KE layers" in str(fig.layer) and "entity span" in fig.position and "full model" in fig.reference
    assert (
        "UDS control figures" in block.controls_statement and "non-adjudicating" in block.controls_statement
    )
    only = assemble_block([Entry("UDS", "removed", result_figure("post_removal", uds[0][2]))])
    assert not only.controls_run and "were not run for UDS" in only.controls_statement
    assert only.model_dump()["adjudicating"] is False


def test_audits_are_registered_and_record_parameters(latent_states: dict[str, Any]) -> None:
    names = registry.names("audit")
    for name in (
        "uds",
        "uds_no_retain",
        "logit_lens_uds",
        "j_access",
        "logit_lens_access",
        "direction_survival",
    ):
        assert name in names
    audit = registry.create("audit", "uds", {"tau": 0.1})
    assert audit.spec.params["tau"] == 0.1 and audit.spec.params["uds_compat"] is False
    assert audit.adjudicating is False and audit.surface == "latent"
    s = latent_states
    res = uds(s["full"], s["retain"], s["retain"], s["tokenizer"], EXAMPLES, audit.config)
    assert res.tau == 0.1 and res.score == pytest.approx(1.0)
    with pytest.raises(Exception, match="accepted parameters"):
        registry.create("audit", "uds", {"taus": 0.1})
    assert not any("probe" in n and "topic" in n for n in names)  # no naive topic probe (C-H8)
