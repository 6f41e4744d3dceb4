"""Every malformed-config branch gives one ConfigError naming the file, the dotted field and the requirement."""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path
from typing import Any

import pytest

from remnant.config import load_config, parse_config
from remnant.errors import ConfigError

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
BASE_D = tomllib.loads((EXAMPLES / "classd-smollm2-npo.toml").read_text(encoding="utf-8"))
BASE_C = tomllib.loads((EXAMPLES / "classc-claimant.toml").read_text(encoding="utf-8"))


def _set(path: str, value: Any) -> Any:
    def mutate(r: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = r
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = value

    return mutate


def _pop(path: str) -> Any:
    def mutate(r: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = r
        for p in parents:
            node = node[p]
        del node[last]

    return mutate


# (id, base, mutation, field named, rule named)
CASES: list[tuple[str, dict[str, Any], Any, str, str]] = [
    ("claim-statement-missing", BASE_D, _pop("claim.statement"), "claim.statement", "R1"),
    ("claim-statement-blank", BASE_D, _set("claim.statement", "   "), "claim.statement", "R1"),
    ("claim-target-missing", BASE_D, _pop("claim.target"), "claim.target", "R1a"),
    ("claim-model-missing", BASE_D, _pop("claim.model"), "claim.model", "R1b"),
    ("claim-process-missing", BASE_D, _pop("claim.process"), "claim.process", "R1c"),
    ("claim-audience-missing", BASE_D, _pop("claim.audience"), "claim.audience", "R1d"),
    ("claim-unknown-field", BASE_D, _set("claim.scope", "x"), "claim.scope", "R1"),
    ("class-invalid", BASE_D, _set("class", "E"), "class", "R0.1"),
    ("track-missing", BASE_D, _pop("track"), "track", "R0.1"),
    ("target-both", BASE_D, _set("target.pack", "p"), "target", "R2"),
    ("target-neither", BASE_D, _pop("target.mint"), "target", "R2"),
    ("mint-class-mismatch", BASE_D, _set("target.mint.class", "C"), "target.mint.class", "R2"),
    ("mint-entities-zero", BASE_D, _set("target.mint.entities", 0), "target.mint.entities", "R2"),
    ("mint-not-ground-truth", BASE_D, _set("target.ground_truth", False), "target.ground_truth", "R7"),
    ("provenance-missing", BASE_C, _pop("target.provenance"), "target.provenance", "R2"),
    ("control-both", BASE_D, _set("models.control.folder", "x"), "models.control", "R3"),
    ("control-missing", BASE_D, _pop("models.control"), "models.control", "R3"),
    ("pre-removal-neither", BASE_D, _set("models.pre_removal", {}), "models.pre_removal", "R2"),
    (
        "install-lr-zero",
        BASE_D,
        _set("models.pre_removal.install.lr", 0.0),
        "models.pre_removal.install.lr",
        "R2",
    ),
    ("post-removal-both", BASE_D, _set("models.post_removal.folder", "x"), "models.post_removal", "R1c"),
    (
        "post-folder-params",
        BASE_C,
        _set("models.post_removal.params", {"a": 1}),
        "models.post_removal.params",
        "R23",
    ),
    (
        "method-bad-name",
        BASE_D,
        _set("models.post_removal.method", "N P O"),
        "models.post_removal.method",
        "R1c",
    ),
    ("dtype-invalid", BASE_D, _set("models.dtype", "int8"), "models.dtype", "R25"),
    ("device-invalid", BASE_D, _set("models.device", "tpu"), "models.device", "R24"),
    ("gating-invalid", BASE_D, _set("gating_metric", "acc"), "gating_metric", "R7"),
    ("gating-w-with-ground-truth", BASE_D, _set("gating_metric", "w"), "gating_metric", "R7"),
    ("justification-missing", BASE_D, _pop("gating_justification"), "gating_justification", "R7"),
    ("tau-zero", BASE_D, _set("tau", 0.0), "tau", "R14"),
    ("tau-above-one", BASE_D, _set("tau", 1.5), "tau", "R14"),
    ("tau-quoted", BASE_D, _set("tau", "0.5"), "tau", "R14"),
    ("utility-missing", BASE_D, _pop("utility"), "utility", "R9"),
    ("utility-no-metrics", BASE_D, _set("utility.metrics", []), "utility.metrics", "R9"),
    ("utility-deployment-missing", BASE_D, _pop("utility.deployment"), "utility.deployment", "R9"),
    ("phi-above-one", BASE_D, _set("utility.phi", 1.1), "utility.phi", "R9"),
    ("perplexity-not-lm", BASE_D, _set("utility.metrics", ["perplexity"]), "utility.metrics", "R9"),
    ("utility-params-orphan", BASE_D, _set("utility.params", {"rouge": {}}), "utility.params.rouge", "R9"),
    ("probe-install-split", BASE_D, _set("probe.splits", ["install"]), "probe.splits", "R16"),
    ("probe-relearn-split", BASE_D, _set("probe.splits", ["probe", "relearn"]), "probe.splits", "R16"),
    ("probe-unknown-split", BASE_D, _set("probe.splits", ["heldout"]), "probe.splits", "R16"),
    ("probe-repeated-split", BASE_D, _set("probe.splits", ["probe", "probe"]), "probe.splits", "R16"),
    ("probe-max-n-below-min-n", BASE_C, _set("probe.max_n", 50), "probe.max_n", "R21"),
    ("min-n-zero", BASE_C, _set("min_n", 0), "min_n", "R21"),
    ("prefill-missing", BASE_D, _pop("attacks.prefill"), "attacks.prefill", "C-Q1"),
    ("many-shot-missing", BASE_C, _pop("attacks.many_shot"), "attacks.many_shot", "C-Q1"),
    (
        "disabled-without-reason",
        BASE_D,
        _set("attacks.repeated_sampling.enabled", False),
        "attacks.repeated_sampling.reason",
        "C-Q2",
    ),
    ("attack-unknown-key", BASE_D, _set("attacks.prefill.budget", 3), "attacks.prefill.budget", "R14"),
    ("attack-bad-name", BASE_D, _set("attacks.Bad-Name", {}), "attacks.Bad-Name", "R14"),
    ("q-track-relearning", BASE_D, _set("track", "Q"), "attacks.relearning", "C2"),
    ("w-track-class-d-no-relearning", BASE_D, _pop("attacks.relearning"), "attacks.relearning", "D-5.3"),
    ("w-track-class-c-no-relearning", BASE_C, _set("track", "W"), "attacks.relearning", "C1"),
    (
        "relearning-disabled-on-w",
        BASE_D,
        _set("attacks.relearning.enabled", False),
        "attacks.relearning",
        "D-5.3",
    ),
    (
        "budgets-decreasing",
        BASE_D,
        _set("attacks.relearning.budgets", [16, 8]),
        "attacks.relearning.budgets",
        "C-W1",
    ),
    (
        "budget-zero",
        BASE_D,
        _set("attacks.relearning.budgets", [0, 8]),
        "attacks.relearning.budgets[0]",
        "C-W1",
    ),
    ("relearning-lr-missing", BASE_D, _pop("attacks.relearning.lr"), "attacks.relearning.lr", "C-W1"),
    (
        "checkpoint-at-epoch-end",
        BASE_D,
        _set("attacks.relearning.first_epoch_checkpoints", [1.0]),
        "attacks.relearning.first_epoch_checkpoints[0]",
        "C-W3",
    ),
    (
        "checkpoints-unsorted",
        BASE_D,
        _set("attacks.relearning.first_epoch_checkpoints", [0.5, 0.25]),
        "attacks.relearning.first_epoch_checkpoints",
        "C-W3",
    ),
    (
        "checkpoints-empty",
        BASE_D,
        _set("attacks.relearning.first_epoch_checkpoints", []),
        "attacks.relearning.first_epoch_checkpoints",
        "C-W3",
    ),
    (
        "relearning-split-invalid",
        BASE_D,
        _set("attacks.relearning.split", "same-items"),
        "attacks.relearning.split",
        "C-W6",
    ),
    ("evidence-rule-invalid", BASE_D, _set("evidence_rule", "median"), "evidence_rule", "V1"),
    ("seed-missing", BASE_D, _pop("seeds.master"), "seeds.master", "R23"),
    ("seed-beyond-i-json", BASE_D, _set("seeds.master", 2**53), "seeds.master", "R23"),
    ("class-d-block-missing", BASE_D, _pop("class_d"), "class_d", "D-5.1"),
    (
        "class-d-on-class-c",
        BASE_C,
        _set("class_d", {"insignificance_threshold": 0.1, "justification": "j"}),
        "class_d",
        "D-5.1",
    ),
    (
        "threshold-zero",
        BASE_D,
        _set("class_d.insignificance_threshold", 0.0),
        "class_d.insignificance_threshold",
        "D-5.1",
    ),
    (
        "class-d-justification-missing",
        BASE_D,
        _pop("class_d.justification"),
        "class_d.justification",
        "D-5.2",
    ),
    ("preset-invalid", BASE_D, _set("preset", "huge"), "preset", "R21"),
]


@pytest.mark.parametrize(
    ("base", "mutate", "field", "rule"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_malformed_config_names_file_field_and_rule(
    base: dict[str, Any], mutate: Any, field: str, rule: str
) -> None:
    data = copy.deepcopy(base)
    mutate(data)
    with pytest.raises(ConfigError) as info:
        parse_config(data, source="config.toml")
    message = str(info.value)
    assert message.startswith("config.toml: ")
    assert f"field '{field}'" in message
    assert info.value.requirement == rule
    assert message.endswith(f"({rule})")


def test_several_problems_are_all_listed() -> None:
    data = copy.deepcopy(BASE_D)
    del data["claim"]["process"]
    del data["tau"]
    with pytest.raises(ConfigError) as info:
        parse_config(data, source="config.toml")
    message = str(info.value)
    assert message.startswith("config.toml: 2 problems:")
    assert "field 'claim.process' missing (R1c)" in message and "field 'tau' missing (R14)" in message


@pytest.mark.parametrize(
    "mutate",
    [
        _set("models.post_removal.params.trust_remote_code", False),
        _set("models.control.trust_remote_code", True),
        _set("trust_remote_code", True),
        _set("attacks.prefill.params.flags", ["--trust_remote_code"]),
        _set("utility.params.general_knowledge", {"Trust_Remote_Code": 1}),
    ],
)
def test_trust_remote_code_is_refused_anywhere(mutate: Any, tmp_path: Path) -> None:
    data = copy.deepcopy(BASE_D)
    mutate(data)
    with pytest.raises(ConfigError, match=r"^config\.toml: 'trust_remote_code' at '.+' is refused"):
        parse_config(data, source="config.toml")


def test_trust_remote_code_in_a_file_names_the_file(tmp_path: Path) -> None:
    text = (EXAMPLES / "classd-smollm2-npo.toml").read_text(encoding="utf-8")
    path = tmp_path / "remote.toml"
    path.write_text(
        text.replace('device = "auto"', 'device = "auto"\ntrust_remote_code = false'), encoding="utf-8"
    )
    with pytest.raises(
        ConfigError, match=r"remote\.toml: 'trust_remote_code' at 'models\.trust_remote_code'"
    ):
        load_config(path)


def test_valid_alternatives_are_accepted() -> None:
    """The branches above are not refusing everything: their valid neighbours load."""
    data = copy.deepcopy(BASE_D)
    data["attacks"]["repeated_sampling"] = {"enabled": False, "reason": "target answers are single tokens"}
    data["models"]["control"] = {"folder": "models/base"}
    data["models"]["device"] = "cuda:1"
    data["probe"]["splits"] = ["probe", "controls", "retain"]
    data["attacks"]["gcg"] = {"enabled": True, "params": {"steps": 50}}
    cfg = parse_config(data, source="ok.toml")
    assert cfg.attacks.named()["gcg"].params == {"steps": 50}
    c = copy.deepcopy(BASE_C)
    c["target"]["ground_truth"] = False
    c["gating_metric"] = "w"
    c["utility"]["metrics"] = ["perplexity"]
    c["utility"]["general_language_modelling"] = True
    assert parse_config(c, source="ok.toml").gating_metric == "w"
