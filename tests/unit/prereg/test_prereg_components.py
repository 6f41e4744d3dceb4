"""Nothing unrunnable is pre-registered (R14): `remnant preregister` creates every declared component first, so a
parameter name, type or value a component refuses ends in exit 2 naming the file, the field and the requirement,
and no prereg.json is written."""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path
from typing import Any

import pytest

from remnant.assess.inputs import check_components
from remnant.assess.params import constructor_types, type_problem
from remnant.cli import main
from remnant.config import parse_config
from remnant.errors import ConfigError

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
BASE_D = tomllib.loads((EXAMPLES / "classd-smollm2-npo.toml").read_text(encoding="utf-8"))


def _with(path: str, value: Any) -> dict[str, Any]:
    data = copy.deepcopy(BASE_D)
    *parents, last = path.split(".")
    node = data
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    return data


# (id, dotted path, value, field named, requirement, text in the message)
CASES: list[tuple[str, str, Any, str, str, str]] = [
    ("attack-unknown", "attacks.fuzz", {"params": {}}, "attacks.fuzz", "R14", "unknown attack 'fuzz'"),
    (
        "attack-impl-unknown",
        "attacks.prefill.params.implementation",
        "prefil",
        "attacks.prefill",
        "R14",
        "'prefil'",
    ),
    (
        "attack-param-misspelt",
        "attacks.many_shot.params",
        {"shotz": 4},
        "attacks.many_shot.params",
        "R14",
        "shotz",
    ),
    (
        "attack-literal",
        "attacks.prefill.params.source",
        "question",
        "attacks.prefill.params",
        "R14",
        "'answer_stem' or 'fixed'",
    ),
    (
        "attack-bool-type",
        "attacks.many_shot.params.use_prefix_cache",
        "yes",
        "attacks.many_shot.params",
        "R14",
        "valid boolean",
    ),
    (
        "attack-tuple-type",
        "attacks.repeated_sampling.params.ks",
        "1,8",
        "attacks.repeated_sampling.params",
        "R14",
        "ks",
    ),
    (
        "attack-ctor-range",
        "attacks.many_shot.params.shots",
        0,
        "attacks.many_shot.params",
        "R14",
        "shots >= 1",
    ),
    (
        "attack-ks-beyond-n",
        "attacks.repeated_sampling.params.ks",
        [1, 64],
        "attacks.repeated_sampling.params",
        "R14",
        "n_samples=32",
    ),
    (
        "method-unknown",
        "models.post_removal.method",
        "npo2",
        "models.post_removal.method",
        "R1c",
        "unknown method 'npo2'",
    ),
    (
        "method-param-misspelt",
        "models.post_removal.params",
        {"betta": 0.1},
        "models.post_removal.params",
        "R23",
        "betta",
    ),
    (
        "method-param-type",
        "models.post_removal.params.beta",
        "big",
        "models.post_removal.params",
        "R23",
        "valid number",
    ),
    (
        "method-schedule",
        "models.post_removal.params.schedule",
        "wobbly",
        "models.post_removal.params",
        "R23",
        "schedule",
    ),
    (
        "method-bf16-int",
        "models.post_removal.params.bf16",
        1,
        "models.post_removal.params",
        "R23",
        "valid boolean",
    ),
    (
        "utility-unknown",
        "utility.metrics",
        ["general_knowledge"],
        "utility.metrics",
        "R9",
        "general_knowledge",
    ),
    (
        "utility-param",
        "utility.params.retain_kappa",
        {"max_new_tokenz": 8},
        "utility.params.retain_kappa",
        "R9",
        "max_new_tokenz",
    ),
    (
        "utility-param-type",
        "utility",
        {
            **BASE_D["utility"],
            "metrics": ["general_qa_kappa"],
            "params": {"general_qa_kappa": {"kept_ids": 5}},
        },
        "utility.params.general_qa_kappa",
        "R9",
        "'kept_ids' = 5",
    ),
    (
        "relearn-param-unknown",
        "attacks.relearning.params",
        {"momentum": 0.9},
        "attacks.relearning.params",
        "C-W1",
        "momentum",
    ),
    (
        "relearn-schedule-type",
        "attacks.relearning.params",
        {"schedule": 3},
        "attacks.relearning.params",
        "C-W1",
        "valid string",
    ),
    (
        "relearn-schedule",
        "attacks.relearning.params",
        {"schedule": "wobbly"},
        "attacks.relearning.params",
        "C-W1",
        "wobbly",
    ),
    (
        "relearn-trainable-type",
        "attacks.relearning.params",
        {"trainable": "layers"},
        "attacks.relearning.params",
        "C-W1",
        "trainable",
    ),
]


@pytest.mark.parametrize(
    ("path", "value", "field", "rule", "text"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_component_refusal_names_file_field_and_rule(
    path: str, value: Any, field: str, rule: str, text: str
) -> None:
    cfg = parse_config(_with(path, value), source="config.toml")  # reads fine: only the component refuses
    with pytest.raises(ConfigError) as info:
        check_components(cfg)
    message = str(info.value)
    assert message.startswith(f"config.toml: field '{field}'"), message
    assert info.value.requirement == rule, message
    assert text in message, message


def test_examples_and_disabled_attacks_pass() -> None:
    check_components(parse_config(copy.deepcopy(BASE_D), source="d.toml"))
    # a disabled attack is never created, so its parameters are not the component's to refuse (C-Q2)
    disabled = _with("attacks.prefill", {"enabled": False, "reason": "no stem", "params": {"sourc": 1}})
    check_components(parse_config(disabled, source="d.toml"))


def test_method_types_include_the_common_parameters() -> None:
    from remnant import registry

    types = constructor_types(registry.get("method", "npo"))
    assert types["beta"] is float and types["lr"] is float and types["batch_size"] is int
    assert type_problem(int, 1.0) is not None and type_problem(float, 1) is None
    assert type_problem(tuple[int, ...], [1, 2]) is None and type_problem(tuple[int, ...], "12") is not None


def _config_file(tmp_path: Path, old: str, new: str) -> Path:
    text = (EXAMPLES / "classd-smollm2-npo.toml").read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / "config.toml"
    path.write_text(text.replace(old, new), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("old", "new", "text"),
    [
        ("params = { shots = 16 }", "params = { shots = 0 }", "shots >= 1"),
        ("beta = 0.1 }", 'beta = 0.1, schedule = "wobbly" }', "schedule"),
        ("lr = 1e-4, epochs = 4", "lr = nan, epochs = 4", "is nan"),
    ],
    ids=["ctor-range", "method-schedule", "nan"],
)
def test_preregister_refuses_and_writes_nothing(
    old: str, new: str, text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config_file(tmp_path, old, new)
    run = tmp_path / "run"
    assert main(["preregister", str(config), "--out", str(run)]) == 2
    err = capsys.readouterr().err
    assert str(config) in err and text in err
    assert not (run / "prereg.json").exists()


def test_preregister_accepts_the_example(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config_file(tmp_path, "params = { shots = 16 }", "params = { shots = 16 }")
    assert main(["preregister", str(config), "--out", str(tmp_path / "run")]) == 0
    assert (tmp_path / "run" / "prereg.json").is_file()


def test_freeze_into_a_file_is_refused(tmp_path: Path) -> None:
    """The Python API too: a run folder that is a file is a PreregError naming it, not an OSError."""
    from remnant.errors import PreregError
    from remnant.prereg import freeze

    blocker = tmp_path / "run"
    blocker.write_text("not a folder")
    cfg = parse_config(copy.deepcopy(BASE_D), source="d.toml")
    with pytest.raises(PreregError, match=r"run: cannot create the run folder") as info:
        freeze(cfg, blocker)
    assert info.value.requirement == "R14"
    assert blocker.read_text() == "not a folder"
