"""The reports a researcher would put in a paper: tables beside the published figures, inline SVG figures with the
y = x and reference-shift lines, the pre-registration; and the published numbers themselves."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from _study_pools import PLANTED_ORIENTATION
from test_readmission_rule import FAIL, cells

from remnant.results import PoolTable
from remnant.stats import harmonic_mean
from remnant.studies.config import GoodhartConfig, MetaEvalConfig, ReadmissionConfig
from remnant.studies.document import to_html, to_markdown
from remnant.studies.goodhart_core import GoodhartResult, GoodhartRow, summarise
from remnant.studies.meta_eval import meta_eval
from remnant.studies.published import UDS_PAPER, UDS_PAPER_OTHER
from remnant.studies.readmission import decide
from remnant.studies.report import goodhart_document, meta_eval_document, readmission_document


def test_published_rows_are_consistent() -> None:
    """HM = HM(Q, R) to the published rounding, and UDS's overall is the paper's 0.951 (the UDS paper §4)."""
    for row in (*UDS_PAPER.values(), *UDS_PAPER_OTHER.values()):
        assert row.q is not None and row.r is not None and row.hm is not None
        assert harmonic_mean([row.q, row.r]) == pytest.approx(row.hm, abs=6e-4), row.label
    assert UDS_PAPER["uds"].overall == pytest.approx(0.951, abs=5e-4)


def _svg_ids(html: str) -> list[str]:
    return re.findall(r'\bid="([^"]+)"', html)


def test_meta_eval_report(pool: tuple[PoolTable, dict[str, Any], Path]) -> None:
    result = meta_eval(pool[0], MetaEvalConfig(n_resamples=100, orientation=PLANTED_ORIENTATION))
    doc = meta_eval_document(result)
    md, html = to_markdown(doc), to_html(doc)
    assert "Non-adjudicating" in md and "C-H6" in md
    assert "Not pre-registered" in md  # computed in memory, and the report says so
    ids = _svg_ids(html)
    assert len(ids) == len(set(ids))  # several plots share one page
    assert "roc-chance" in ids and "r0-shift" in ids and "q0-identity" in ids
    assert "<script" not in html and html.count("<svg") == 1 + 2 * len(result.metrics)


def test_readmission_report_prints_annex_b6_beside_ours() -> None:
    result = decide(cells(content=lambda *_: FAIL), ReadmissionConfig(estimator="j_access"))
    md = to_markdown(readmission_document(result))
    assert "**demote**" in md and "C-H9" in md
    assert "| npo | 36 | 0 | 36 | failed | held | 10/0/0 |" in md  # our row, then Annex B.6's


def test_goodhart_report_and_reading() -> None:
    cfg = GoodhartConfig(audit="j_access", weights=[0.0, 10.0], seeds=[0, 1])

    def row(weight: float, seed: int, audit: float, recovery: float) -> GoodhartRow:
        return GoodhartRow(
            weight=weight,
            seed=seed,
            status="completed",
            audit=audit,
            kappa_forget=0.0,
            kappa_forget_installed=1.0,
            kappa_retain=0.9,
            kappa_retain_installed=1.0,
            relearned=recovery,
            recovery=recovery,
            control_relearned=0.0,
        )

    rows = [
        row(0.0, 0, 0.67, 0.28),
        row(0.0, 1, 0.69, 0.30),
        row(10.0, 0, 0.55, 0.39),
        row(10.0, 1, 0.53, 0.38),
    ]
    reading = summarise(rows, cfg)
    assert reading["audit_improved"] and reading["recovery_did_not_fall"] and reading["goodhart"]
    assert reading["rho_audit"] < 0 < reading["rho_recovery"]
    result = GoodhartResult(config=cfg, surrogate="s", rows=rows, **reading)
    md = to_markdown(goodhart_document(result))
    assert "the audit was optimised, the target was not removed" in md and "0.67 → 0.55" in md
    honest = summarise([row(0.0, 0, 0.67, 0.28), row(10.0, 0, 0.55, 0.05)], cfg)
    assert honest["goodhart"] is False and "fell" in honest["finding"]
    uds = summarise([row(0.0, 0, 0.2, 0.3), row(10.0, 0, 0.1, 0.3)], cfg.model_copy(update={"audit": "uds"}))
    assert (
        uds["audit_direction"] == "higher" and uds["audit_improved"] is False
    )  # UDS reads better when higher
