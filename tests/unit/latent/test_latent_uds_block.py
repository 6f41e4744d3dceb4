"""The latent block says, beside each UDS figure, whether the last layer was read as the UDS reference reads it
(``uds_compat``) and how many examples the mean excludes (C-H7b; docs/latent.md, §1.7). Non-adjudicating."""

from __future__ import annotations

import html
import re
from typing import Any

from _latent_tiny import EXAMPLES, MISSING

from remnant.latent.block import last_layer_text, result_figure
from remnant.latent.uds import POSITION, UDSConfig, UDSResult, score_source, stage1, uds_no_retain
from remnant.report.render import render_report
from remnant.statement.example import example_statement
from remnant.statement.latent import Entry, assemble_block


def _result(**update: Any) -> UDSResult:
    base = UDSResult(
        measurement="uds",
        score=0.4,
        n_examples=20,
        n_scored=15,
        n_no_ke=3,
        n_span_not_found=2,
        coverage=0.75,
        layers=list(range(15, 30)),
        tau=0.05,
        prompt_format="raw",
        uds_compat=False,
        n_blocks=30,
        position=POSITION,
        target_model="f" * 64,
        retain_model="r" * 64,
        source_model="a" * 64,
        stage1_key="k" * 64,
        layer_mean_ler=[None] * 15,
        examples=[],
        provenance="[V] test",
    )
    return base.model_copy(update=update)


def _figure_text(r: UDSResult) -> tuple[str, str]:
    fig = result_figure("post_removal", r)
    assert fig is not None
    return str(fig.layer), fig.position


def test_last_layer_reading_is_stated_beside_the_figure() -> None:
    off, _ = _figure_text(_result())
    on, _ = _figure_text(_result(uds_compat=True))
    assert "last block (29) read from its block output, before the final norm" in off
    assert "uds_compat off: not as the UDS reference code" in off
    assert "last block (29) read as the UDS reference code reads it (uds_compat on" in on
    absent, _ = _figure_text(_result(layers=list(range(15, 29)), uds_compat=True))
    assert "last block (29) not patched" in absent and "uds_compat on" not in absent
    lens, _ = _figure_text(_result(measurement="logit_lens_uds"))
    assert "as the reference's logit-lens baseline reads it" in lens
    assert "read from its block output" in last_layer_text(
        _result(n_blocks=None)
    )  # older results: still said


def test_exclusions_are_stated_beside_the_figure() -> None:
    _, position = _figure_text(_result())
    assert (
        "scored 15/20; excluded from the mean as the reference excludes them: 3 with no KE layer" in position
    )
    assert "2 with no entity span" in position
    layer, position = _figure_text(_result(measurement="uds_no_retain", retain_model=None, n_no_ke=0))
    assert "no KE selection" in layer and "excluded: 2 with no entity span" in position


def test_report_shows_the_words(latent_states: dict[str, Any]) -> None:
    s = latent_states
    cfg = UDSConfig(uds_compat=True)
    s1 = stage1(s["full"], s["retain"], s["tokenizer"], [*EXAMPLES, MISSING], cfg)
    res = score_source(s["full"], s["retain"], s1, cfg)
    assert res.n_blocks == 2 and res.n_span_not_found == 1
    block = assemble_block([Entry("UDS", "", result_figure("post_removal", res))])
    page = render_report(example_statement().model_copy(update={"latent": block}))
    text = re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))
    assert "last block (1) read as the UDS reference code reads it (uds_compat on" in text
    assert f"{res.n_no_ke} with no KE layer" in text and "1 with no entity span" in text
    plain = uds_no_retain(s["full"], s["retain"], s["tokenizer"], EXAMPLES)
    assert plain.n_blocks == 2 and "uds_compat off" in last_layer_text(plain)
