"""`remnant assess` end to end on the tiny model: statement, manifest, signature, reports; recompute; resume.

One uninterrupted run is shared by the module (the tiny Llama, a tiny Class D pack, gradient ascent as the
removal). Its statement is the reference the recomputed and the killed-and-resumed runs must reproduce byte for
byte (R24: same config and seed, same statement bytes, timestamps and signatures aside; here the
pre-registration timestamp is shared, so the whole file must match).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from remnant.cli import main
from remnant.config import load_config
from remnant.prereg import freeze, load_prereg
from remnant.records import CellRecord, Observation, RecordStore

sys.path.insert(0, str(Path(__file__).resolve().parent))
from assess_fixtures import tiny_pack, write_config  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


class Killed(Exception):
    """Raised from the test seam to stand in for a kill in the middle of the run."""


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory, tiny_llama_dir: Path) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("assess")
    assert main(["keys", "generate", "--out", str(root / "keys")]) == 0
    pack = tiny_pack(root / "pack")
    config = write_config(
        root / "config.toml", pack=pack, control=tiny_llama_dir, key=root / "keys" / "remnant.key"
    )
    return {"root": root, "pack": pack, "config": config, "keys": root / "keys"}


@pytest.fixture(scope="module")
def reference(setup: dict[str, Path]) -> Path:
    """One complete, uninterrupted assessment."""
    run = setup["root"] / "run-a"
    assert main(["preregister", str(setup["config"]), "--out", str(run)]) == 0
    assert main(["assess", str(setup["config"]), "--out", str(run), "--quiet"]) == 0
    return run


def _records(run: Path) -> list[Any]:
    return RecordStore(run / "records.jsonl").read()


def test_assess_writes_a_conformant_signed_statement(
    reference: Path, setup: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    for name in (
        "statement.json",
        "statement.dsse.json",
        "manifest.json",
        "report.html",
        "report-customer.html",
    ):
        assert (reference / name).is_file(), name
    capsys.readouterr()
    assert main(["validate", str(reference / "statement.json")]) == 0
    assert json.loads(capsys.readouterr().out)["conformant"] is True
    assert (
        main(["verify", str(reference / "statement.dsse.json"), "--key", str(setup["keys"] / "remnant.pub")])
        == 0
    )
    statement = json.loads((reference / "statement.json").read_text())
    manifest_bytes = (reference / "manifest.json").read_bytes()
    import hashlib

    assert statement["manifest_ref"] == "sha256:" + hashlib.sha256(manifest_bytes).hexdigest()  # R23, K4
    names = [a["name"] for a in statement["facts"]["attacks"]]
    assert names == ["relearning", "prefill", "many_shot", "repeated_sampling"]  # C1, C-Q1, in config order
    assert statement["class"] == "D" and statement["track"] == "W" and statement["tier"].startswith("W")
    assert statement["pre_registration"]["digest"] == load_prereg(reference).digest  # R14
    manifest = json.loads(manifest_bytes)
    roles = [m["role"] for m in manifest["models"]]
    assert roles == ["control", "pre_removal", "post_removal"]  # R23: every state identified
    assert {c["name"] for c in manifest["components"]} >= {
        "grad_ascent",
        "prefill",
        "many_shot",
        "repeated_sampling_analytic",
        "retain_kappa",
    }
    assert manifest["results"]["curves"], "relearning curves, both models, every checkpoint (C-W5)"


def test_post_removal_and_control_get_identical_inputs(reference: Path) -> None:
    """R3, C-Q4, C-W5: every attack cell exists for both states, on the same items, checkpoints and seed."""
    records = _records(reference)
    cells = [r for r in records if isinstance(r, CellRecord) and r.status == "run" and r.metric == "kappa"]
    by_state: dict[str, set[tuple[str, str, int]]] = {}
    for c in cells:
        if c.surface in ("inference_time", "relearning"):
            by_state.setdefault(c.model_state, set()).add((c.attack, c.checkpoint, c.n))
    assert by_state["post_removal"] == by_state["control"]
    checkpoints = {c.checkpoint for c in cells if c.attack == "relearning" and c.model_state == "control"}
    assert checkpoints == {
        f"budget={b}/step={s}" for b, s in ((4, 0), (4, 1), (4, 2), (8, 0), (8, 2), (8, 4))
    }
    obs = [r for r in records if isinstance(r, Observation) and r.attack == "prefill"]
    items = {
        state: sorted((o.item_id, o.seed) for o in obs if o.model_state == state)
        for state in ("post_removal", "control")
    }
    assert items["post_removal"] == items["control"] and len(items["control"]) == 6
    utility = {
        c.model_state
        for c in records
        if isinstance(c, CellRecord) and c.surface == "utility" and c.attack == "none"
    }
    assert utility == {"control", "pre_removal", "post_removal"}  # R10, R11
    attack_stage = [
        c
        for c in records
        if isinstance(c, CellRecord) and c.surface == "utility" and c.attack == "relearning"
    ]
    assert [c.checkpoint for c in attack_stage] == ["budget=8/final"]  # R12, C-W4


def test_recompute_reproduces_the_statement_without_torch(reference: Path) -> None:
    before = (reference / "statement.json").read_bytes()
    code = (
        "import sys; from remnant.assess.recompute import recompute; "
        f"o = recompute({str(reference)!r}); "
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules, 'recompute imported torch'; "
        "print(o.verdict.verdict)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert (reference / "statement.json").read_bytes() == before


def test_kill_and_resume_gives_the_identical_statement(reference: Path, setup: dict[str, Path]) -> None:
    from remnant.assess.run import Session, assess

    run = setup["root"] / "run-b"
    cfg = load_config(setup["config"])
    freeze(cfg, run, registered_at=load_prereg(reference).registered_at)

    def kill(label: str) -> None:
        if label == "relearning b=8 on post_removal":
            raise Killed(label)

    with pytest.raises(Killed):
        assess(cfg, run, session=Session(progress=False, before_cell=kill, log=lambda _: None))
    assert not (run / "statement.json").exists()
    done_before = RecordStore(run / "records.jsonl").completed_cells()
    resumed = Session(progress=False, log=lambda _: None)
    outcome = assess(cfg, run, resume=True, session=resumed)
    assert outcome.statement is not None
    assert RecordStore(run / "records.jsonl").completed_cells() > done_before
    # Same figures byte for byte; the pins differ, as the records carry the resume and their timestamps (R23).
    from remnant.assess.finalize import without_pins

    assert without_pins(json.loads((run / "statement.json").read_bytes())) == without_pins(
        json.loads((reference / "statement.json").read_bytes())
    )
    # Without --resume a run folder with records is refused rather than silently mixed (exit 2).
    assert main(["assess", str(setup["config"]), "--out", str(run), "--quiet"]) == 2


def test_a_deviation_is_recorded_and_carried_into_the_statement(
    reference: Path, setup: dict[str, Path]
) -> None:
    """R15: a changed pre-registered value is refused until recorded, then listed in the statement."""
    from remnant.prereg import record_deviation

    run = setup["root"] / "run-dev"
    config = setup["root"] / "config-dev.toml"
    config.write_text(setup["config"].read_text())
    assert main(["preregister", str(config), "--out", str(run)]) == 0
    config.write_text(setup["config"].read_text().replace("phi = 0.5", "phi = 0.4"))
    assert main(["assess", str(config), "--out", str(run), "--quiet"]) == 2
    assert not (run / "statement.json").exists()
    record_deviation(run, "utility.phi", 0.5, 0.4, "floor agreed lower with the claimant", "before attacks")
    import shutil

    for name in ("records.jsonl",):
        (run / name).unlink(missing_ok=True)
    shutil.copytree(reference / "states", run / "states")
    assert main(["assess", str(config), "--out", str(run), "--quiet"]) == 0
    statement = json.loads((run / "statement.json").read_text())
    assert statement["deviations"][0]["field"] == "utility.phi"
    assert statement["facts"]["phi"] == 0.4


def test_format_checks_follow_the_pre_removal_cells(reference: Path) -> None:
    """C-Q3: every attack is also run on the pre-removal model, and the statement's explanation for each attack is
    the one its post- and pre-removal deltas (recomputed here from the cell records) call for. The tiny
    installation does not reach its target (R2), so an intact pre-removal score is no sign that a drop is
    specific to the removal: such an attack is undetermined."""
    statement = json.loads((reference / "statement.json").read_text())
    assert statement["installation"]["reached"] is False  # κ 0/120 against 0.9 after one epoch
    cells = [r for r in _records(reference) if isinstance(r, CellRecord) and r.checkpoint == "final"]

    def rate(attack: str, state: str) -> float:
        (cell,) = [c for c in cells if c.attack == attack and c.model_state == state and c.metric == "kappa"]
        return cell.k / cell.n

    attacked = {c.attack for c in cells if c.surface == "inference_time" and c.status == "run"}
    checks = {c["attack"]: c for c in statement["format_checks"]}
    assert attacked and set(checks) == attacked
    for name, check in checks.items():
        post = rate(name, "post_removal") - rate("none", "post_removal")
        pre = rate(name, "pre_removal") - rate("none", "pre_removal")
        assert check["post_delta"] == pytest.approx(post, abs=1e-6)
        assert check["pre_delta"] == pytest.approx(pre, abs=1e-6)
        expected = "not_reduced" if post >= 0 else "format_disruption" if pre < 0 else "undetermined"
        assert check["explanation"] == expected and check["reason"]


def test_report_shows_the_format_checks(reference: Path) -> None:
    """The person-readable report carries C-Q3's explanation for every attack in the statement."""
    statement = json.loads((reference / "statement.json").read_text())
    html = (reference / "report.html").read_text()
    assert "C-Q3" in html
    for check in statement["format_checks"]:
        assert check["explanation"].replace("_", " ") in html and check["attack"] in html
