"""White-box audits inside an assessment (C-H6, C-H7): `[audits.uds]` and `[audits.jaccess]` on the tiny model.

The session's finished tiny Class D assessment (``chained_run``) is copied with its trained states, and resumed
with the same config plus three audit tables: UDS (controls not run), J-Access with both Annex B control states
(the never-installed control put through the same gradient ascent; the control installed with the pack's
content-shuffled twin) and a direction-survival table asked to read a block the tiny model does not have, so it
fails. Resuming reuses every cell of the run and computes only the audit cells, so this costs seconds.

Checked: the statement's ``latent`` block carries both audits, each figure with its reference (the pre-removal
model and the never-modified control, named with their digests), the states compared, the layer and the position
(C-H7b); J-Access lists its control figures and UDS is named in the not-run statement (C-H7c); the failed audit is
a failed reading whose reason the statement prints, not a crashed run; ``remnant validate`` passes; ``remnant
recompute`` writes the same statement bytes; the facts, verdict, tier and cells are the unaudited run's (C-H6); a
second resume computes nothing.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from remnant.cli import main
from remnant.records import Event, Reading, RecordStore

sys.path.insert(0, str(Path(__file__).resolve().parent))
from assess_fixtures import write_config  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

#: The tiny Llama has 2 blocks: the lens maps block 0 to block 1, so the band is block 0.
AUDITS = """
[audits.uds]
max_items = 4

[audits.jaccess]
probes = "answer"
controls = true
lens_prompts = 2
params = { target_layer = 1, skip_first = 2, dim_batch = 16, positions = 3, max_new_tokens = 6, band = [0.0, 0.9], band_rule = "fixed", k = 40 }

[audits.direction]
params = { layers = [7], positions = ["last"], n_resamples = 50 }

[seeds]"""
#: Audit cells: UDS on θ_U; J-Access on θ_U and both control states; direction on θ_U (fails).
AUDIT_CELLS = 5


def _statement(run: Path) -> dict[str, Any]:
    data = json.loads((run / "statement.json").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def _finished(run: Path) -> dict[str, Any]:
    """The data of the run's last stage_finished event: cells computed and reused."""
    events = [r for r in RecordStore(run / "records.jsonl").read() if isinstance(r, Event)]
    return next(e.data for e in reversed(events) if e.kind == "stage_finished")


@pytest.fixture(scope="module")
def audited(
    chained_run: Path, tmp_path_factory: pytest.TempPathFactory, tiny_llama_dir: Path
) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("audited")
    run = root / "run"
    shutil.copytree(chained_run, run)  # trained states included: the resume loads them
    extra: dict[str, Any] = {"[seeds]": AUDITS}
    config = write_config(
        root / "config.toml", pack=chained_run.parent / "pack", control=tiny_llama_dir, **extra
    )
    assert main(["assess", str(config), "--out", str(run), "--resume", "--quiet"]) == 0
    return {"run": run, "config": config, "plain": chained_run}


def test_only_the_audit_cells_are_computed_on_resume(audited: dict[str, Path]) -> None:
    assert _finished(audited["run"])["computed"] == AUDIT_CELLS
    readings = [r for r in RecordStore(audited["run"] / "records.jsonl").read() if isinstance(r, Reading)]
    by = {(r.audit, r.model_state): r for r in readings}
    assert set(by) == {
        ("uds", "post_removal"),
        ("jaccess", "post_removal"),
        ("jaccess", "procedure_control"),
        ("jaccess", "content_control"),
        ("direction", "post_removal"),
    }
    assert all(r.adjudicating is False and r.surface == "latent" for r in readings)
    assert by[("jaccess", "procedure_control")].role == "procedure_control"
    failed = by[("direction", "post_removal")]
    assert failed.status == "failed" and failed.value is None and failed.reason and "7" in failed.reason


def test_latent_block_carries_both_audits_with_every_c_h7_field(audited: dict[str, Path]) -> None:
    s = _statement(audited["run"])
    block = s["latent"]
    assert block["adjudicating"] is False and block["status"] == "supplementary"
    figures = {(f["name"], f["states"][0]): f for f in block["figures"]}
    assert set(figures) == {
        ("uds", "post_removal"),
        ("j_access", "post_removal"),
        ("j_access", "procedure_control"),
        ("j_access", "content_control"),
    }
    states = json.loads(json.dumps(s["model"]))
    control_digest = states["control_identity"].split("sha256:")[1][:12]
    for (_, audited_state), f in figures.items():
        # C-H7b: the reference names the never-modified control (the model that never saw the target) by digest
        assert "control " + control_digest in f["reference"] and "never-modified control" in f["reference"]
        assert f["states"] == [audited_state, "pre_removal", "control"]
        assert f["layer"] and f["position"]
    assert figures[("uds", "post_removal")]["layer"].startswith("blocks 0-1, KE layers at tau=0.05")
    assert "scored 4/4" in figures[("uds", "post_removal")]["position"]
    assert figures[("j_access", "post_removal")]["layer"] == "band [0]"
    assert figures[("j_access", "post_removal")]["position"].startswith("last 3 prompt positions; top-40")
    text = block["controls_statement"]
    # C-H7c: J-Access has both control states' figures; UDS is named as not having them; direction failed
    assert "J-Access (j_access) control figures: procedure_control band [0]" in text
    assert (
        "were not run for UDS (uds); its figures therefore cannot be interpreted as being about the target"
        in text
    )
    assert "direction survival (direction_survival) on post_removal (removed) failed: " in text
    assert block["controls_run"] is False and text.endswith("Latent figures are non-adjudicating (C-H6).")


def test_validate_passes(audited: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["validate", str(audited["run"] / "statement.json")]) == 0
    assert json.loads(capsys.readouterr().out) == {"conformant": True, "violations": []}


def test_audits_carry_no_weight(audited: dict[str, Path]) -> None:
    """C-H6: facts, verdict, tier, cells and surfaces are the unaudited run's."""
    with_audits, without = _statement(audited["run"]), _statement(audited["plain"])
    for key in ("facts", "verdict", "verdict_reasons", "tier", "cells", "surfaces", "utility"):
        assert with_audits[key] == without[key], key
    assert without["latent"]["absent"] is True


def test_recompute_reproduces_the_statement(audited: dict[str, Path], tmp_path: Path) -> None:
    run = shutil.copytree(audited["run"], tmp_path / "run", ignore=shutil.ignore_patterns("states"))
    before = (run / "statement.json").read_bytes()
    assert main(["recompute", str(run)]) == 0
    assert (run / "statement.json").read_bytes() == before


def test_a_second_resume_computes_nothing(audited: dict[str, Path], tmp_path: Path) -> None:
    run = shutil.copytree(audited["run"], tmp_path / "run")
    before = _statement(run)
    assert main(["assess", str(audited["config"]), "--out", str(run), "--resume", "--quiet"]) == 0
    assert _finished(run)["computed"] == 0
    after = _statement(run)
    assert after["latent"] == before["latent"]


STATES = ("post_removal", "control", "pre_removal", "procedure_control", "content_control")


@st.composite
def readings(draw: st.DrawFn) -> Reading:
    """A reading any audit could have written: a figure, an undefined value, a failure or a state not run."""
    status = draw(st.sampled_from(["run", "run", "failed", "not_run"]))
    value = draw(st.none() | st.floats(-5, 5, allow_nan=False)) if status == "run" else None
    return Reading(
        run_id="run-x",
        cell_key=draw(st.text("0123456789abcdef", min_size=8, max_size=8)),
        measurement=draw(st.sampled_from(["uds", "j_access", "logit_lens_access", "direction_survival"])),
        audit=draw(st.sampled_from(["uds", "jaccess", "logit_lens", "direction"])),
        component={"name": "uds", "version": "1.0", "params": {}},
        model_state=draw(st.sampled_from(STATES)),
        role=draw(st.sampled_from(["removed", "procedure_control", "content_control"])),
        states=[draw(st.sampled_from(STATES)), "pre_removal", "control"],
        reference="never-modified control",
        layer=draw(st.sampled_from(["band [0]", "block 3"])),
        position="last",
        value=value,
        status=status,
        reason=None if value is not None else "why",
    )


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_readings_never_move_the_verdict_or_the_tier(audited: dict[str, Path], data: st.DataObject) -> None:
    """C-H6 as a property: permuting the run's readings, dropping some and adding others anywhere in the records
    leaves the facts, the verdict and the tier the finalizer draws exactly as they were."""
    from remnant.assess.finalize import finalize

    records = RecordStore(audited["run"] / "records.jsonl").read()
    others = [r for r in records if not isinstance(r, Reading)]
    kept = data.draw(st.permutations([r for r in records if isinstance(r, Reading)]))
    kept = kept[: data.draw(st.integers(0, len(kept)))]
    mixed: list[Any] = list(others)
    for reading in kept + data.draw(st.lists(readings(), max_size=6)):
        mixed.insert(data.draw(st.integers(0, len(mixed))), reading)
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        shutil.copytree(
            audited["run"], run, ignore=shutil.ignore_patterns("states", "records.jsonl", "*.html")
        )
        RecordStore(run / "records.jsonl").extend(mixed)
        outcome = finalize(run, reports=False)
    want = _statement(audited["plain"])
    assert outcome.verdict.verdict == want["verdict"]
    assert outcome.statement.tier == want["tier"] and outcome.tier.tier >= 1
    got = outcome.statement.model_dump(mode="json", by_alias=True)
    assert got["facts"] == want["facts"] and got["cells"] == want["cells"]
