"""Seed 003's auditor tables on the tiny model: the columns, the values against an independent ROUGE, identical
states giving identical rows (C-Q4), and ``remnant study auditors`` on a tiny pack (files, exit codes)."""

from __future__ import annotations

import copy
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch

from remnant.attacks.base import no_attack
from remnant.attacks.rouge_scoring import SamplingSpec, score_rouge
from remnant.cli import main
from remnant.errors import ConfigError
from remnant.score.probe import Probe
from remnant.studies.auditor_table import PAPER_COLUMNS, AuditorSpec, auditor_table, render_markdown

TESTS = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TESTS / "integration"))
sys.path.insert(0, str(TESTS / "integration" / "hostile"))
from assess_fixtures import tiny_pack  # noqa: E402
from harness import Hostile, check  # noqa: E402

COLUMNS = ["Base", "A", "I", "M+I", "M+I+A", "GCG", "SoftGCG", "ActPert"]


def _reference(ref: str, gen: str) -> float:
    from rouge_score import rouge_scorer  # type: ignore[import-untyped]

    return float(rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True).score(ref, gen)["rougeL"].recall)


def test_paper_layout_and_presets() -> None:
    assert [c.label for c in PAPER_COLUMNS] == COLUMNS
    assert [c.attack for c in PAPER_COLUMNS] == [
        None,
        "aoa",
        "icl",
        "mask_icl",
        "mask_icl_aoa",
        "gcg",
        "soft_prompt",
        "actpert",
    ]
    # the seed's Table 2 (sampled) leaves out GCG and SoftGCG
    assert [c.label for c in PAPER_COLUMNS if c.sampled] == ["Base", "A", "I", "M+I", "M+I+A", "ActPert"]
    paper = AuditorSpec.preset("paper")
    assert paper.sampling == SamplingSpec(50, 2.0, 40, 64) and paper.max_new_tokens == 64
    assert all(not c.params for c in paper.columns)  # every attack at its registered defaults
    tiny = AuditorSpec.preset("tiny", samples=0, seed=3)
    assert tiny.sampling is None and tiny.seed == 3
    assert dict(tiny.columns[5].params)["steps"] == 1 and dict(tiny.columns[6].params)["steps"] == 2
    assert AuditorSpec.preset("tiny", samples=7).sampling == SamplingSpec(7, 2.0, 40, 4)
    with pytest.raises(ConfigError):
        AuditorSpec.preset("huge")


def _probes_answering_base(attack_ctx: Any, probes: list[Probe]) -> list[Probe]:
    base = no_attack(attack_ctx, probes)
    return [
        replace(p, answer=b.output or "", accepted=(b.output or "x",))
        for p, b in zip(probes, base, strict=True)
    ]


def test_table_values_are_seed003_rouge(attack_ctx: Any, probes: list[Probe]) -> None:
    spec = AuditorSpec.preset("tiny", samples=2, seed=attack_ctx.seed)
    ctx = replace(attack_ctx, max_new_tokens=spec.max_new_tokens)
    items = _probes_answering_base(ctx, probes)  # references the tiny model reaches unattacked
    model, tok = attack_ctx.model, attack_ctx.tokenizer
    other = copy.deepcopy(model)
    with torch.no_grad():
        for p in other.parameters():
            p.add_(0.05 * torch.sign(p))
    states = {"pre-removal": (model, tok), "post-removal": (other, tok)}
    table = auditor_table(states, items, spec=spec, retain=attack_ctx.demonstrations)
    assert table.columns == COLUMNS and [r.state for r in table.rows] == list(states)
    assert table.sampled_columns == ["Base", "A", "I", "M+I", "M+I+A", "ActPert"]
    pre = table.rows[0].cells
    assert pre["Base"].rouge_greedy == 1.0 and pre["Base"].kappa_k == len(items)
    for label, cell in pre.items():
        # a cell is the mean over items of rouge-score's stemmed ROUGE-L recall of the greedy generation
        values = [_reference(i["reference"], i["output"]) for i in cell.items]
        assert cell.rouge_greedy == pytest.approx(sum(values) / len(values)), label
        assert cell.n == len(items) and cell.attack["name"] == (
            PAPER_COLUMNS[COLUMNS.index(label)].attack or "none"
        )
        if label in table.sampled_columns:
            means = [i["rouge_sampled_mean"] for i in cell.items]
            maxes = [i["rouge_sampled_max"] for i in cell.items]
            assert cell.rouge_sampled_mean == pytest.approx(sum(means) / len(means))
            assert cell.rouge_sampled_max == pytest.approx(sum(maxes) / len(maxes))
        else:
            assert cell.rouge_sampled_mean is None and cell.rouge_sampled_max is None
    # the same cell as scoring that attack directly with the same context (seed, budgets)
    direct = score_rouge(spec.columns[-1].build(), ctx, items, sampling=spec.sampling)
    assert [i.to_dict() for i in direct] == pre["ActPert"].items
    assert table.rows[1].cells["Base"].items != pre["Base"].items  # another state, other generations
    text = render_markdown(table)
    assert "| Model | Base | A | I | M+I | M+I+A | GCG | SoftGCG | ActPert |" in text
    assert "| pre-removal | 1.000 |" in text
    assert "| Model | Base | A | I | M+I | M+I+A | ActPert |" in text  # Table 2's columns
    assert f"| pre-removal | {len(items)}/{len(items)} |" in text  # κ beside ROUGE


def _tiny_args(model: Path, pack: Path, out: Path, *extra: str) -> list[str]:
    return [
        "study",
        "auditors",
        "--model",
        str(model),
        "--model",
        str(model),
        "--pack",
        str(pack),
        "--out",
        str(out),
        "--preset",
        "tiny",
        "--max-items",
        "2",
        "--quiet",
        *extra,
    ]


def test_study_auditors_cli_writes_the_tables(
    tiny_llama_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pack = tiny_pack(tmp_path / "pack")
    out = tmp_path / "out"
    assert main(_tiny_args(tiny_llama_dir, pack, out, "--samples", "2")) == 0
    printed = capsys.readouterr().out
    data = json.loads((out / "auditors.json").read_text())
    md = (out / "auditors.md").read_text()
    assert printed.strip() == md.strip()
    assert data["columns"] == COLUMNS and data["sampling"]["n_samples"] == 2
    assert [r["state"] for r in data["rows"]] == ["model", "model#2"]
    assert len(data["probes"]) == 2 and all(".p" in i for i in data["probes"])  # free-text P items
    # ICL's target demonstrations: the removal split's items on the probed entities
    entity = data["probes"][0].split(".")[0]
    assert data["target_demonstrations"] and all(d.startswith(entity) for d in data["target_demonstrations"])
    icl_items = data["rows"][0]["cells"]["I"]["items"]
    assert len(icl_items) == 2
    same = [
        {n: {k: v for k, v in c.items() if k != "seconds"} for n, c in r["cells"].items()}
        for r in data["rows"]
    ]
    assert same[0] == same[1]  # the same folder twice: the same row (C-Q4)
    assert "## Greedy decoding (seed 003 Table 1)" in md and "mean/max over 2 samples" in md

    # each (model, column) is one engine cell: the same folder twice is measured once, and the same command
    # again into the same folder attacks nothing and writes the same tables
    from remnant.records import Reading, RecordStore

    readings = [r for r in RecordStore(out / "records.jsonl").read() if isinstance(r, Reading)]
    assert len(readings) == len(COLUMNS) and {r.audit for r in readings} == {"auditors"}

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a recorded cell was attacked again")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("remnant.studies.auditor_table.score_rouge", refuse)
        assert main(_tiny_args(tiny_llama_dir, pack, out, "--samples", "2")) == 0
    assert json.loads((out / "auditors.json").read_text()) == data
    assert (out / "auditors.md").read_text() == md


@pytest.mark.parametrize(
    "case",
    [
        Hostile(
            "missing-pack",
            lambda t: (_tiny_args(t / "m", t / "nopack", t / "o"), str(t / "nopack")),
        ),
        Hostile(
            "out-is-a-file",
            lambda t: (
                _tiny_args(t / "m", t / "p", (t / "f.txt").resolve()),
                str(t / "f.txt"),
            ),
            requirement="C-Q4",
        ),
    ],
    ids=lambda c: c.id,
)
def test_study_auditors_refuses_bad_input(
    case: Hostile, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "f.txt").write_text("not a folder")
    check(case, tmp_path, capsys)
