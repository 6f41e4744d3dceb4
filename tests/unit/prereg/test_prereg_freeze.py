"""Pre-registration: freeze writes what R14 lists, digests it stably, and is never rewritten."""

from __future__ import annotations

import copy
import hashlib
import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from remnant import HARNESS_VERSION, STANDARD_VERSION
from remnant.config import AssessmentConfig, load_config, parse_config, preregistered
from remnant.errors import PreregError
from remnant.prereg import PREREG_FILE, PreRegistration, freeze, load_prereg, prereg_digest
from remnant.statement.canonical import canonical_json

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
CLASS_D = EXAMPLES / "classd-smollm2-npo.toml"


def cfg_with(mutate: Any = None) -> AssessmentConfig:
    raw = tomllib.loads(CLASS_D.read_text(encoding="utf-8"))
    raw = copy.deepcopy(raw)
    if mutate is not None:
        mutate(raw)
    return parse_config(raw, source="t.toml", base_dir=EXAMPLES)


def test_freeze_writes_every_r14_field(tmp_path: Path) -> None:
    cfg = load_config(CLASS_D)
    prereg = freeze(cfg, tmp_path / "run", registered_at="2025-06-01T12:00:00Z")
    data = json.loads((tmp_path / "run" / PREREG_FILE).read_text(encoding="utf-8"))
    assert data["registered_at"] == "2025-06-01T12:00:00Z"
    assert data["standard_version"] == STANDARD_VERSION and data["harness_version"] == HARNESS_VERSION
    values = data["values"]
    assert values["gating_metric"] == "kappa" and values["gating_justification"].startswith("Canary")
    assert values["tau"] == 0.5
    assert values["utility"]["metrics"] == ["retain_kappa"] and values["utility"]["phi"] == 0.9
    assert values["probe"] == {"splits": ["probe", "controls"], "max_n": 60}
    assert values["attacks"]["relearning"]["budgets"] == [8, 16]
    assert values["attacks"]["relearning"]["first_epoch_checkpoints"] == [0.5]
    assert sorted(k for k in values["attacks"] if k != "relearning") == [
        "many_shot",
        "prefill",
        "repeated_sampling",
    ]
    assert values["min_n"] == 30 and values["seeds"] == {"master": 20250601}
    assert values["evidence_rule"] == "point" and values["class_d"]["insignificance_threshold"] == 0.05
    assert (
        values["claim"]["statement"] == cfg.claim.statement
        and values["class"] == "D"
        and values["track"] == "W"
    )
    assert data["pack_digest"] is None  # a pack still to be minted is fixed by its mint spec and seed
    body = canonical_json({"pack_digest": None, "values": preregistered(cfg)})
    assert data["digest"] == prereg.digest == "sha256:" + hashlib.sha256(body).hexdigest()
    assert PreRegistration.model_validate(data) == prereg


def test_digest_is_stable_across_runs_and_timestamps(tmp_path: Path) -> None:
    a = freeze(load_config(CLASS_D), tmp_path / "a", registered_at="2025-01-01T00:00:00Z")
    b = freeze(load_config(CLASS_D), tmp_path / "b")
    assert a.digest == b.digest and a.registered_at != b.registered_at
    assert a.digest == GOLDEN


GOLDEN = "sha256:31fc9f8c9c0eea41e5dc508afa460f20e52e1a5d826dde6898fb51b026ff40f7"


def _leaves(value: Any, prefix: str = "") -> list[str]:
    if isinstance(value, dict) and value:
        return [leaf for k, v in value.items() for leaf in _leaves(v, f"{prefix}.{k}" if prefix else k)]
    return [prefix]


def test_digest_changes_when_any_preregistered_value_changes() -> None:
    """Every leaf of the frozen values is under the digest."""
    values = preregistered(load_config(CLASS_D))
    base = prereg_digest(values, None)
    leaves = _leaves(values)
    assert len(leaves) > 40
    for leaf in leaves:
        changed = copy.deepcopy(values)
        *parents, last = leaf.split(".")
        node = changed
        for p in parents:
            node = node[p]
        node[last] = ["changed", node[last]]
        assert prereg_digest(changed, None) != base, leaf
    assert prereg_digest(values, "sha256:00") != base


def test_refreezing_same_values_keeps_the_original(tmp_path: Path) -> None:
    first = freeze(load_config(CLASS_D), tmp_path, registered_at="2025-01-01T00:00:00Z")
    before = (tmp_path / PREREG_FILE).read_bytes()
    again = freeze(cfg_with(lambda r: r["models"].__setitem__("device", "cpu")), tmp_path)
    assert again == first and (tmp_path / PREREG_FILE).read_bytes() == before


def test_refreezing_different_values_is_refused(tmp_path: Path) -> None:
    freeze(load_config(CLASS_D), tmp_path)
    before = (tmp_path / PREREG_FILE).read_bytes()
    with pytest.raises(
        PreregError, match=r"already frozen with different values \(changed: 'tau'\).*\(R15\)"
    ):
        freeze(cfg_with(lambda r: r.__setitem__("tau", 0.6)), tmp_path)
    assert (tmp_path / PREREG_FILE).read_bytes() == before


def test_missing_and_edited_prereg_are_refused(tmp_path: Path) -> None:
    with pytest.raises(PreregError, match=r"prereg\.json: missing; run `remnant preregister.*\(R14\)"):
        load_prereg(tmp_path)
    freeze(load_config(CLASS_D), tmp_path)
    path = tmp_path / PREREG_FILE
    path.write_text(path.read_text(encoding="utf-8").replace('"tau": 0.5', '"tau": 0.4'), encoding="utf-8")
    with pytest.raises(PreregError, match="edited after freezing"):
        load_prereg(tmp_path)
    path.write_text("{", encoding="utf-8")
    with pytest.raises(PreregError, match="not a readable pre-registration"):
        load_prereg(tmp_path)


def test_existing_pack_digest_is_frozen(tmp_path: Path) -> None:
    from remnant.packs import ClassDSpec, mint_class_d, write_pack

    pack = mint_class_d(ClassDSpec(entities=6, controls=2, seed=3, general=False))
    write_pack(pack, tmp_path / "pack")

    cfg = parse_config(
        copy.deepcopy(tomllib.loads(CLASS_D.read_text(encoding="utf-8"))) | {"target": {"pack": "pack"}},
        source="t.toml",
        base_dir=tmp_path,
    )
    prereg = freeze(cfg, tmp_path / "run")
    assert prereg.pack_digest == pack.digest
    assert prereg.digest == prereg_digest(prereg.values, pack.digest)


def test_missing_pack_cannot_be_preregistered(tmp_path: Path) -> None:
    cfg = load_config(EXAMPLES / "classc-claimant.toml")
    with pytest.raises(PreregError, match=r"classc-claimant\.toml: field 'target\.pack'.*\(R14\)"):
        freeze(cfg, tmp_path)
    assert not (tmp_path / PREREG_FILE).exists()
    prereg = freeze(cfg, tmp_path, pack_digest="sha256:abc")
    assert prereg.pack_digest == "sha256:abc"


def test_statement_fields_match_the_statement_schema(tmp_path: Path) -> None:
    from remnant.statement.schema import PreRegistration as StatementPreRegistration

    prereg = freeze(load_config(CLASS_D), tmp_path)
    block = StatementPreRegistration.model_validate(prereg.statement_fields())
    assert block.tau == 0.5 and block.min_n == 30 and block.digest == prereg.digest
