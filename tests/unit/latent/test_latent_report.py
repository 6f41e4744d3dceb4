"""The latent block in the technical and customer reports (C-H6, C-H7a-c): labelled non-adjudicating, every figure
with its reference, states, layer and position, the control figures when run, and no effect on the verdict."""

from __future__ import annotations

import html
import re

from remnant.latent.block import result_figure
from remnant.latent.jaccess import JAccessResult
from remnant.latent.uds import POSITION, UDSResult
from remnant.report.render import render_report
from remnant.statement.example import example_statement
from remnant.statement.latent import Entry, assemble_block


def _text(page: str) -> str:
    body = re.sub(r"<style>.*?</style>", " ", page, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", body)))


def _uds(score: float, source: str) -> UDSResult:
    return UDSResult(
        measurement="uds",
        score=score,
        n_examples=18,
        n_scored=16,
        n_no_ke=2,
        n_span_not_found=0,
        coverage=16 / 18,
        layers=list(range(15, 30)),
        tau=0.05,
        prompt_format="chat",
        uds_compat=False,
        position=POSITION,
        target_model="f" * 64,
        retain_model="r" * 64,
        source_model=source * 64,
        stage1_key="k" * 64,
        layer_mean_ler=[None] * 15,
        examples=[],
        provenance="[V] test",
    )


def _jacc(jocc: float) -> JAccessResult:
    return JAccessResult(
        measurement="j_access",
        jocc=jocc,
        jocc_clipped=min(max(jocc, 0.0), 1.0),
        access_audited=0.5,
        access_original=0.9,
        access_retain=0.1,
        retain_gap=0.4,
        retain_gap_ci95=(0.1, 0.6),
        n_probes=18,
        n_silent=12,
        k=1,
        layers=[22, 24, 26],
        positions="last 1 prompt positions",
        audited_model="a" * 64,
        original_model="f" * 64,
        retain_model="r" * 64,
        provenance="[N] test",
    )


def _uds_entries() -> list[Entry]:
    """UDS on the post-removal state and both control states (C-H7c)."""
    rows = [("post_removal", "", "a", 0.42), ("procedure_control", "procedure_control", "b", 0.31)]
    rows.append(("content_control", "content_control", "c", 0.9))
    return [Entry("UDS", role, result_figure(state, _uds(v, src))) for state, role, src, v in rows]


def test_latent_block_with_controls_renders_labelled_with_every_c_h7_field() -> None:
    block = assemble_block(
        [*_uds_entries(), Entry("J-Access", "", result_figure("post_removal", _jacc(0.5)))]
    )
    assert block.adjudicating is False and block.status == "supplementary"
    statement = example_statement()
    page = render_report(statement.model_copy(update={"latent": block}))
    text = _text(page)
    assert "non-adjudicating" in text and "carry no weight in the verdict or the tier" in text  # C-H7a, C-H6
    assert "Reference computed against" in text
    # C-H7b: reference, states, layer and position beside the value
    assert (
        "uds 0.420 full model ffffffffffff (patched into); retain model rrrrrrrrrrrr post_removal, full, retain"
        in text
    )
    assert "blocks 15-29, KE layers at tau=0.05" in text and "prompt format chat; scored 16/18" in text
    assert "j_access 0.500 original ffffffffffff and retain-only rrrrrrrrrrrr anchors (eq. 6)" in text
    assert "A − A(retain) +0.400 [+0.100, +0.600] (Newcombe paired 95 %)" in text  # the gap JOcc rests on
    # C-H7c: UDS has both controls (their figures listed); J-Access does not (the not-run statement names it)
    assert "UDS control figures: procedure_control" in text and "content_control" in text
    assert "were not run for J-Access" in text and "cannot be interpreted as being about the target" in text
    assert "Controls (C-H7c): not run." in text  # one measurement without controls: the block says not run
    # C-H6: the verdict and tier are the statement's own, untouched by the latent figures
    base = _text(render_report(statement))
    verdict = re.search(r"Tier W\d: [A-Za-z ]+", base)
    assert verdict is not None and verdict.group(0) in text


def test_controls_run_when_every_measurement_has_both() -> None:
    block = assemble_block(_uds_entries())
    text = _text(render_report(example_statement().model_copy(update={"latent": block})))
    assert "Controls (C-H7c): run." in text
    assert "UDS control figures: procedure_control" in text and "0.310" in text and "0.900" in text
