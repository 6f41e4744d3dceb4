"""Every number in a config is checked where it sits (R14, R23): non-finite, negative, huge and mistyped values in
typed fields and in free-form parameter tables are refused with the file, the dotted field and the requirement."""

from __future__ import annotations

import copy
import datetime as dt
import math
import tomllib
from pathlib import Path
from typing import Any

import pytest

from remnant.config import parse_config
from remnant.config.fields import MAX_BATCH, MAX_EPOCHS, MAX_INT, MAX_LR, MAX_N, MAX_SEED, MAX_TOKENS
from remnant.config.numbers import PARAM_BOUNDS, Bound, number_problem
from remnant.errors import ConfigError
from remnant.packs.classd import MAX_ENTITIES, MAX_REPETITIONS

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
BASE_D = tomllib.loads((EXAMPLES / "classd-smollm2-npo.toml").read_text(encoding="utf-8"))
BASE_C = tomllib.loads((EXAMPLES / "classc-claimant.toml").read_text(encoding="utf-8"))
NAN, INF = math.nan, math.inf


def _set(data: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    data = copy.deepcopy(data)
    *parents, last = path.split(".")
    node = data
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    return data


# (id, base, dotted path set, value, field named, requirement, text in the message)
CASES: list[tuple[str, dict[str, Any], str, Any, str, str, str]] = [
    ("tau-nan", BASE_D, "tau", NAN, "tau", "R14", "is nan: every number must be finite"),
    ("tau-inf", BASE_D, "tau", INF, "tau", "R14", "is inf"),
    ("tau-tiny", BASE_D, "tau", 1e-300, "tau", "R14", "greater than or equal to 0.0001"),
    ("phi-nan", BASE_D, "utility.phi", NAN, "utility.phi", "R9", "finite"),
    ("min-n-huge", BASE_D, "min_n", 10**12, "min_n", "R21", "beyond ±10**9"),
    ("min-n-over-max", BASE_D, "min_n", MAX_N + 1, "min_n", "R21", "less than or equal to 1000000"),
    ("max-n-negative", BASE_D, "probe.max_n", -5, "probe.max_n", "R14", "greater than or equal to 1"),
    ("entities-1e15", BASE_D, "target.mint.entities", 10**15, "target.mint.entities", "R2", "beyond ±10**9"),
    (
        "entities-over-mint",
        BASE_D,
        "target.mint.entities",
        MAX_ENTITIES + 1,
        "target.mint.entities",
        "R2",
        "5000",
    ),
    ("entities-class-d-3", BASE_D, "target.mint.entities", 3, "target.mint.entities", "D4", "at least 4"),
    (
        "controls-negative",
        BASE_D,
        "target.mint.controls",
        -1,
        "target.mint.controls",
        "D4",
        "greater than or equal",
    ),
    (
        "controls-class-d-0",
        BASE_D,
        "target.mint.controls",
        0,
        "target.mint.controls",
        "D4",
        "at least 1 control",
    ),
    (
        "repetitions-huge",
        BASE_D,
        "target.mint.repetitions",
        MAX_REPETITIONS + 1,
        "target.mint.repetitions",
        "D5",
        "",
    ),
    ("mint-seed-negative", BASE_D, "target.mint.seed", -1, "target.mint.seed", "R23", "seed range"),
    ("master-seed-huge", BASE_D, "seeds.master", 2**60, "seeds.master", "R23", "seed range"),
    (
        "install-lr-inf",
        BASE_D,
        "models.pre_removal.install.lr",
        INF,
        "models.pre_removal.install.lr",
        "R2",
        "inf",
    ),
    (
        "install-lr-2",
        BASE_D,
        "models.pre_removal.install.lr",
        2.0,
        "models.pre_removal.install.lr",
        "R2",
        "less than",
    ),
    (
        "install-epochs",
        BASE_D,
        "models.pre_removal.install.max_epochs",
        MAX_EPOCHS + 1,
        "models.pre_removal.install.max_epochs",
        "R2",
        "",
    ),
    (
        "install-batch-0",
        BASE_D,
        "models.pre_removal.install.batch_size",
        0,
        "models.pre_removal.install.batch_size",
        "R23",
        "",
    ),
    (
        "install-kappa-nan",
        BASE_D,
        "models.pre_removal.install.target_kappa",
        NAN,
        "models.pre_removal.install.target_kappa",
        "R2",
        "finite",
    ),
    ("relearn-lr-nan", BASE_D, "attacks.relearning.lr", NAN, "attacks.relearning.lr", "C-W1", "finite"),
    ("relearn-lr-neg-inf", BASE_D, "attacks.relearning.lr", -INF, "attacks.relearning.lr", "C-W1", "-inf"),
    (
        "relearn-batch-0",
        BASE_D,
        "attacks.relearning.batch_size",
        0,
        "attacks.relearning.batch_size",
        "C-W5",
        "",
    ),
    (
        "relearn-batch-huge",
        BASE_D,
        "attacks.relearning.batch_size",
        MAX_BATCH + 1,
        "attacks.relearning.batch_size",
        "C-W5",
        "",
    ),
    (
        "relearn-epochs-huge",
        BASE_D,
        "attacks.relearning.max_epochs",
        10**9,
        "attacks.relearning.max_epochs",
        "C-W1",
        "",
    ),
    (
        "budget-huge",
        BASE_D,
        "attacks.relearning.budgets",
        [8, MAX_N + 1],
        "attacks.relearning.budgets[1]",
        "C-W1",
        "",
    ),
    (
        "budgets-too-many",
        BASE_D,
        "attacks.relearning.budgets",
        list(range(1, 66)),
        "attacks.relearning.budgets",
        "C-W1",
        "at most 64",
    ),
    (
        "checkpoint-nan",
        BASE_D,
        "attacks.relearning.first_epoch_checkpoints",
        [NAN],
        "attacks.relearning.first_epoch_checkpoints[0]",
        "C-W3",
        "finite",
    ),
    (
        "threshold-nan",
        BASE_D,
        "class_d.insignificance_threshold",
        NAN,
        "class_d.insignificance_threshold",
        "D-5.1",
        "finite",
    ),
    (
        "threshold-tiny",
        BASE_D,
        "class_d.insignificance_threshold",
        1e-9,
        "class_d.insignificance_threshold",
        "D-5.1",
        "",
    ),
    (
        "battery-tokens-huge",
        BASE_D,
        "class_d.battery",
        {"max_new_tokens": MAX_TOKENS + 1},
        "class_d.battery.max_new_tokens",
        "D-2.2",
        "",
    ),
    (
        "battery-budget-0",
        BASE_D,
        "class_d.battery",
        {"relearning_budgets": [0]},
        "class_d.battery.relearning_budgets[0]",
        "D-5.3",
        "",
    ),
    # free-form parameter tables: the generic walk
    (
        "attack-param-nan",
        BASE_D,
        "attacks.prefill.params.weight",
        NAN,
        "attacks.prefill.params.weight",
        "R14",
        "finite",
    ),
    (
        "attack-param-list-inf",
        BASE_D,
        "attacks.repeated_sampling.params.ks",
        [1, INF],
        "attacks.repeated_sampling.params.ks[1]",
        "R14",
        "inf",
    ),
    (
        "attack-param-nested-huge",
        BASE_D,
        "attacks.prefill.params.extra",
        {"deep": [{"n": -(10**10)}]},
        "attacks.prefill.params.extra.deep[0].n",
        "R14",
        "beyond",
    ),
    (
        "attack-param-date",
        BASE_D,
        "attacks.prefill.params.when",
        dt.date(2025, 1, 1),
        "attacks.prefill.params.when",
        "R14",
        "date or time",
    ),
    (
        "method-param-nan",
        BASE_D,
        "models.post_removal.params.beta",
        NAN,
        "models.post_removal.params.beta",
        "R23",
        "finite",
    ),
    (
        "utility-param-inf",
        BASE_D,
        "utility.params.retain_kappa",
        {"scale": INF},
        "utility.params.retain_kappa.scale",
        "R23",
        "inf",
    ),
    (
        "relearn-param-nan",
        BASE_D,
        "attacks.relearning.params",
        {"weight_decay": NAN},
        "attacks.relearning.params.weight_decay",
        "C-W5",
        "finite",
    ),
    # free-form parameter tables: parameters of known meaning
    (
        "shots-1e12",
        BASE_D,
        "attacks.many_shot.params.shots",
        10**12,
        "attacks.many_shot.params.shots",
        "R14",
        "beyond ±10**9",
    ),
    (
        "shots-5000",
        BASE_D,
        "attacks.many_shot.params.shots",
        5000,
        "attacks.many_shot.params.shots",
        "R14",
        "outside [0, 1024]",
    ),
    (
        "shots-float",
        BASE_D,
        "attacks.many_shot.params.shots",
        1.5,
        "attacks.many_shot.params.shots",
        "R14",
        "must be an integer",
    ),
    (
        "shots-bool",
        BASE_D,
        "attacks.many_shot.params.shots",
        True,
        "attacks.many_shot.params.shots",
        "R14",
        "must be an integer",
    ),
    (
        "shots-string",
        BASE_D,
        "attacks.many_shot.params.shots",
        "16",
        "attacks.many_shot.params.shots",
        "R14",
        "must be an integer",
    ),
    (
        "samples-negative",
        BASE_D,
        "attacks.repeated_sampling.params.n_samples",
        -3,
        "attacks.repeated_sampling.params.n_samples",
        "R14",
        "outside [1, 100000]",
    ),
    (
        "temperature-zero",
        BASE_D,
        "attacks.repeated_sampling.params.temperature",
        0.0,
        "attacks.repeated_sampling.params.temperature",
        "R14",
        "outside (0, 100]",
    ),
    (
        "max-tokens-0",
        BASE_D,
        "attacks.prefill.params.max_new_tokens",
        0,
        "attacks.prefill.params.max_new_tokens",
        "R14",
        "outside [1, 8192]",
    ),
    (
        "attack-batch-0",
        BASE_D,
        "attacks.prefill.params.batch_size",
        0,
        "attacks.prefill.params.batch_size",
        "R14",
        "",
    ),
    (
        "method-lr-2",
        BASE_D,
        "models.post_removal.params.lr",
        2.0,
        "models.post_removal.params.lr",
        "R23",
        "a learning rate",
    ),
    (
        "method-epochs-0",
        BASE_D,
        "models.post_removal.params.epochs",
        0,
        "models.post_removal.params.epochs",
        "R23",
        "outside (0, 1000]",
    ),
    (
        "method-epochs-string",
        BASE_D,
        "models.post_removal.params.epochs",
        "4",
        "models.post_removal.params.epochs",
        "R23",
        "must be a number",
    ),
    (
        "method-grad-accum-0",
        BASE_D,
        "models.post_removal.params.grad_accum",
        0,
        "models.post_removal.params.grad_accum",
        "R23",
        "",
    ),
    (
        "utility-tokens-huge",
        BASE_D,
        "utility.params.retain_kappa",
        {"max_new_tokens": 10**6},
        "utility.params.retain_kappa.max_new_tokens",
        "R23",
        "",
    ),
    (
        "relearn-lora-rank-0",
        BASE_D,
        "attacks.relearning.params",
        {"lora_rank": 0},
        "attacks.relearning.params.lora_rank",
        "C-W5",
        "a LoRA rank",
    ),
    (
        "class-c-samples-huge",
        BASE_C,
        "attacks.repeated_sampling.params.n_samples",
        10**6,
        "attacks.repeated_sampling.params.n_samples",
        "R14",
        "",
    ),
]


@pytest.mark.parametrize(
    ("base", "path", "value", "field", "rule", "text"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_number_out_of_range_is_refused(
    base: dict[str, Any], path: str, value: Any, field: str, rule: str, text: str
) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(_set(base, path, value), source="config.toml")
    message = str(info.value)
    assert message.startswith("config.toml: ")
    assert f"field '{field}'" in message
    assert info.value.requirement == rule, message
    assert text in message


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("tau", 1e-4),
        ("tau", 1),
        ("min_n", 30),
        ("probe.max_n", MAX_N),
        ("target.mint.entities", MAX_ENTITIES),
        ("target.mint.controls", MAX_ENTITIES),
        ("target.mint.repetitions", MAX_REPETITIONS),
        ("target.mint.seed", MAX_SEED),
        ("seeds.master", 0),
        ("models.pre_removal.install.lr", MAX_LR),
        ("attacks.relearning.batch_size", MAX_BATCH),
        ("attacks.relearning.max_epochs", MAX_EPOCHS),
        ("attacks.many_shot.params.shots", 1024),
        ("attacks.many_shot.params.seed", 2**52),  # a seed key may pass ±10**9
        ("attacks.prefill.params.offset", -MAX_INT),
        ("attacks.prefill.params.scale", 1e300),  # finite: the component decides
        ("models.post_removal.params.epochs", 4),  # an integer is a number
        ("models.post_removal.params.warmup_epochs", 0.0),
        ("class_d.insignificance_threshold", 1e-4),
    ],
)
def test_values_at_the_bounds_are_accepted(path: str, value: Any) -> None:
    """The refusals above are bounds, not blanket refusals: the values on the edge load."""
    parse_config(_set(BASE_D, path, value), source="ok.toml")


def test_every_known_parameter_has_a_sane_bound() -> None:
    for name, bound in PARAM_BOUNDS.items():
        assert bound.kind in (int, float), name
        assert bound.lo < bound.hi <= MAX_INT, name
        assert bound.meaning, name
        for bad in (NAN, INF, -INF, True, "1", None, [1]):
            assert bound.problem(bad) is not None, (name, bad)


def test_bound_edges() -> None:
    closed, open_ = Bound(int, 1, 10, False, "a count"), Bound(float, 0, 1, True, "a rate")
    assert closed.problem(1) is None and closed.problem(10) is None
    assert closed.problem(0) == "is 0, outside [1, 10] (a count)"
    assert closed.problem(11) is not None and closed.problem(2.0) == "must be an integer (a count)"
    assert open_.problem(0) == "is 0, outside (0, 1] (a rate)"
    assert open_.problem(1) is None and open_.problem(1e-12) is None and open_.problem(1.0000001) is not None


def test_number_problem_finds_the_first_in_file_order() -> None:
    raw = {"a": {"b": [1, 2, NAN]}, "c": INF}
    assert number_problem(raw) == (("a", "b", 2), "is nan: every number must be finite")
    assert number_problem({"a": 1, "b": [True, False], "seeds": {"master": 2**53 - 1}}) is None
    assert number_problem({"seeds": {"master": 2**53}}) is not None
    assert number_problem({"x_seed": -1}) is not None and number_problem({"x_seed": 10**12}) is None


def test_the_examples_pass() -> None:
    assert number_problem(BASE_D) is None and number_problem(BASE_C) is None
    parse_config(copy.deepcopy(BASE_D), source="d.toml")


def test_toml_nan_and_inf_literals_are_refused_from_a_file(tmp_path: Path) -> None:
    from remnant.config import load_config

    text = (EXAMPLES / "classd-smollm2-npo.toml").read_text(encoding="utf-8")
    for literal, shown in (("nan", "nan"), ("+inf", "inf"), ("-inf", "-inf"), ("-nan", "nan")):
        path = tmp_path / f"{shown}.toml"
        path.write_text(text.replace("lr = 1e-4\nbatch_size = 4", f"lr = {literal}\nbatch_size = 4"))
        with pytest.raises(
            ConfigError, match=rf"{path.name}: field 'attacks.relearning.lr' is {shown}: .*\(C-W1\)"
        ):
            load_config(path)


def test_every_known_parameter_is_documented() -> None:
    doc = (Path(__file__).resolve().parents[3] / "docs" / "config.md").read_text(encoding="utf-8")
    section = doc[doc.index("## Numbers") : doc.index("## Fields")]
    for name, bound in PARAM_BOUNDS.items():
        row = next((line for line in section.splitlines() if f"`{name}`" in line), None)
        assert row is not None, f"{name} is not in docs/config.md's Numbers table"
        kind = "integer" if bound.kind is int else "number"
        assert f"| {kind} in " in row, (name, row)
