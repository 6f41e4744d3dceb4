"""Assessment config: the examples load, round-trip and digest as pinned; seeds derive as documented (R14, R23)."""

from __future__ import annotations

import copy
import hashlib
import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from remnant.config import (
    AssessmentConfig,
    config_digest,
    derive_seed,
    load_config,
    parse_config,
    preregistered,
)
from remnant.config.fields import MAX_SEED
from remnant.errors import ConfigError
from remnant.statement.canonical import canonical_json

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
CLASS_D = EXAMPLES / "classd-smollm2-npo.toml"
CLASS_C = EXAMPLES / "classc-claimant.toml"


def raw(path: Path = CLASS_D) -> dict[str, Any]:
    return tomllib.loads(path.read_text(encoding="utf-8"))


def test_class_d_example_loads_with_its_declared_values() -> None:
    cfg = load_config(CLASS_D)
    assert cfg.claim_class == "D" and cfg.track == "W" and cfg.gating_metric == "kappa"
    assert cfg.tau == 0.5 and cfg.utility.phi == 0.9 and cfg.utility.metrics == ["retain_kappa"]
    assert cfg.models.control.zoo == "smollm2-135m-instruct"
    assert cfg.models.post_removal.method == "npo"
    assert cfg.models.pre_removal.install is not None and cfg.models.pre_removal.install.lr == 3e-4
    assert cfg.target.mint is not None and cfg.target.mint.entities == 200
    assert cfg.class_d is not None and cfg.class_d.insignificance_threshold == 0.05
    assert sorted(cfg.attacks.named()) == ["many_shot", "prefill", "repeated_sampling"]
    # The quick preset filled what the file left out (R14: the frozen values are concrete).
    assert cfg.min_n == 30 and cfg.probe.max_n == 60
    rel = cfg.attacks.relearning
    assert rel is not None and rel.budgets == [8, 16] and rel.max_epochs == 2
    assert rel.first_epoch_checkpoints == [0.5] and rel.lr == 1e-4
    assert cfg.source == CLASS_D


def test_class_c_claimant_example_loads() -> None:
    cfg = load_config(CLASS_C)
    assert (cfg.claim_class, cfg.track, cfg.evidence_rule) == ("C", "Q", "bounds")
    assert cfg.attacks.relearning is None and cfg.class_d is None
    assert cfg.models.post_removal.folder == "models/acme-chat-1.2"
    assert cfg.target.provenance is not None
    # Explicit values win over the default preset's.
    assert cfg.min_n == 100 and cfg.probe.max_n == 300
    assert cfg.resolve("packs/vexite-c") == EXAMPLES / "packs" / "vexite-c"
    assert cfg.resolve("/abs/x") == Path("/abs/x")


@pytest.mark.parametrize("path", [CLASS_D, CLASS_C])
def test_dump_and_parse_round_trip(path: Path) -> None:
    cfg = load_config(path)
    dumped = json.loads(json.dumps(cfg.model_dump(mode="json", by_alias=True)))
    again = parse_config(dumped, source="dump")
    assert again.model_dump() == cfg.model_dump()
    assert config_digest(again) == config_digest(cfg)
    assert again.model_dump(mode="json", by_alias=True) == dumped


def test_config_digest_is_the_documented_hash() -> None:
    cfg = load_config(CLASS_D)
    expected = "sha256:" + hashlib.sha256(canonical_json(preregistered(cfg))).hexdigest()
    assert config_digest(cfg) == expected
    # Pinned: a change to the example or to what is pre-registered must be deliberate.
    assert config_digest(cfg) == GOLDEN_CLASS_D_DIGEST


GOLDEN_CLASS_D_DIGEST = "sha256:0c219ff471450eb1741053d8d9fc8efca31f428627dfb2873316d038bc50f920"


def test_preregistered_holds_r14_fields_and_not_locations() -> None:
    values = preregistered(load_config(CLASS_D))
    for key in (
        "claim",
        "class",
        "track",
        "gating_metric",
        "gating_justification",
        "tau",
        "utility",
        "probe",
    ):
        assert key in values
    for key in ("attacks", "min_n", "evidence_rule", "seeds", "class_d", "target", "standard_version"):
        assert key in values
    assert "models" not in values and "signing" not in values
    assert "pack" not in values["target"]
    assert values["attacks"]["relearning"]["budgets"] == [8, 16]


def mutated(mutate: Any, path: Path = CLASS_D) -> AssessmentConfig:
    data = copy.deepcopy(raw(path))
    mutate(data)
    return parse_config(data, source="t.toml")


@pytest.mark.parametrize(
    "mutate",
    [
        lambda r: r.__setitem__("tau", 0.6),
        lambda r: r["utility"].__setitem__("phi", 0.8),
        lambda r: r["claim"].__setitem__("statement", r["claim"]["statement"] + "!"),
        lambda r: r["seeds"].__setitem__("master", 1),
        lambda r: r["attacks"]["relearning"].__setitem__("budgets", [8, 32]),
        lambda r: r["attacks"]["prefill"]["params"].__setitem__("prefix_tokens", 5),
        lambda r: r.__setitem__("evidence_rule", "bounds"),
        lambda r: r["class_d"].__setitem__("insignificance_threshold", 0.04),
        lambda r: r["target"]["mint"].__setitem__("entities", 201),
        lambda r: r.__setitem__("gating_justification", "other"),
        lambda r: r["probe"].__setitem__("splits", ["probe"]),
    ],
)
def test_digest_changes_with_every_preregistered_field(mutate: Any) -> None:
    assert config_digest(mutated(mutate)) != config_digest(load_config(CLASS_D))


@pytest.mark.parametrize(
    "mutate",
    [
        lambda r: r["models"].__setitem__("device", "cpu"),
        lambda r: r["models"].__setitem__("dtype", "bfloat16"),
        lambda r: r["models"]["pre_removal"]["install"].__setitem__("lr", 1e-3),
        lambda r: r.__setitem__("signing", {"key": "k/remnant.key"}),
    ],
)
def test_digest_ignores_locations_and_precision(mutate: Any) -> None:
    assert config_digest(mutated(mutate)) == config_digest(load_config(CLASS_D))


def test_derive_seed_is_the_documented_hash() -> None:
    digest = hashlib.sha256(b'[7,"relearn","budget=16"]').digest()
    assert derive_seed(7, "relearn", "budget=16") == int.from_bytes(digest[:8], "big") >> 11
    assert derive_seed(7, "relearn", "budget=16") == 5132048697690482  # pinned across processes and versions


def test_derive_seed_separates_paths_and_stays_in_json_range() -> None:
    seeds = {
        derive_seed(m, *p) for m in (0, 1, MAX_SEED) for p in [(), ("a",), ("a", "b"), ("ab",), (1,), ("1",)]
    }
    assert len(seeds) == 18
    assert all(0 <= s <= MAX_SEED for s in seeds)


def test_mint_seed_derives_unless_given() -> None:
    cfg = load_config(CLASS_D)
    assert cfg.mint_seed() == derive_seed(20250601, "mint")
    cfg2 = mutated(lambda r: r["target"]["mint"].__setitem__("seed", 5))
    assert cfg2.mint_seed() == 5


def test_missing_file_and_bad_toml_name_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    with pytest.raises(ConfigError, match="nope.toml: cannot read"):
        load_config(missing)
    bad = tmp_path / "bad.toml"
    bad.write_text("class = \n", encoding="utf-8")
    with pytest.raises(ConfigError, match="bad.toml: not valid TOML"):
        load_config(bad)
