"""Hostile assessment configs given to ``remnant preregister CONFIG --out RUN`` and ``remnant plan CONFIG``.

Each case starts from the tiny valid config of ``tests/integration/assess_fixtures.py`` and breaks one thing:
a non-finite, negative, huge or mistyped value in a typed section or in a free-form parameter table, an unknown
key, a duplicate TOML key, deep nesting, a file that is a folder, not UTF-8 or missing, an ``--out`` that is a
file. Every one is bad input (exit 2) naming the config (or the ``--out`` path) and the requirement of the field;
none writes a prereg.json, and ``plan`` refuses before anything is minted or estimated, so it cannot hang.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from harness import Hostile, check, ids

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from assess_fixtures import tiny_pack, write_config  # noqa: E402

Build = Callable[[Path], tuple[list[str], str]]
_PACK: list[Path] = []


def _pack(tmp: Path) -> Path:
    """The tiny pack, minted once per test session into the first case's folder and shared (read-only)."""
    if not _PACK or not (_PACK[0] / "pack.json").is_file():
        _PACK[:] = [tiny_pack(tmp / "pack")]
    return _PACK[0]


def _argv(command: str, config: Path, tmp: Path) -> list[str]:
    return (
        ["preregister", str(config), "--out", str(tmp / "run")]
        if command == "preregister"
        else ["plan", str(config)]
    )


def _edit(command: str, **replace: str) -> Build:
    """The tiny config with each ``old`` text replaced by ``new``; the output must name the config file."""

    def build(tmp: Path) -> tuple[list[str], str]:
        config = write_config(
            tmp / "config.toml", pack=_pack(tmp), control=tmp / "models" / "control", **replace
        )
        return _argv(command, config, tmp), str(config)

    return build


def _mint(command: str, table: str) -> Build:
    """The tiny config with its pack replaced by a ``[target.mint]`` table (``plan`` would mint it)."""

    def build(tmp: Path) -> tuple[list[str], str]:
        config = write_config(tmp / "config.toml", pack=_pack(tmp), control=tmp / "models" / "control")
        text = re.sub(
            r'\[target\]\npack = "[^"]*"\n', f'[target.mint]\nclass = "D"\n{table}\n', config.read_text()
        )
        config.write_text(text)
        return _argv(command, config, tmp), str(config)

    return build


def _raw(command: str, content: bytes | None, *, folder: bool = False) -> Build:
    """A config path holding ``content`` (None: no file at all; ``folder``: a folder)."""

    def build(tmp: Path) -> tuple[list[str], str]:
        config = tmp / "config.toml"
        if folder:
            config.mkdir()
        elif content is not None:
            config.write_bytes(content)
        return _argv(command, config, tmp), str(config)

    return build


def _appended(command: str, text: str) -> Build:
    """The tiny config with ``text`` appended (a table or key of its own)."""

    def build(tmp: Path) -> tuple[list[str], str]:
        argv, named = _edit(command)(tmp)
        config = Path(named)
        config.write_text(config.read_text() + text)
        return argv, named

    return build


def _out_is_a_file(tmp: Path) -> tuple[list[str], str]:
    argv, _ = _edit("preregister")(tmp)
    (tmp / "run").write_text("an existing file, not a run folder")
    return argv, str(tmp / "run")


def _out_below_a_file(tmp: Path) -> tuple[list[str], str]:
    _, named = _edit("preregister")(tmp)
    (tmp / "blocker").write_text("a file")
    return ["preregister", named, "--out", str(tmp / "blocker" / "run")], "blocker"


P, PLAN = "preregister", "plan"
TAU, METHOD = "tau = 0.5", "lr = 1e-4, epochs = 1"
SHOTS, SAMPLES = "shots = 2, max_new_tokens = 8", "n_samples = 8, ks = [1, 8]"
RELEARN_LR, RELEARN_BATCH = "lr = 1e-3\nmax_epochs = 1\nfirst", "batch_size = 2\nparams"
BUDGETS, CHECKPOINTS = "budgets = [4, 8]", "first_epoch_checkpoints = [0.5]"
INSTALL = "max_epochs = 1\nlr = 1e-3\ntarget_kappa = 0.9\nbatch_size = 16"
UTILITY_PARAMS, SEED = "[utility.params.retain_kappa]\nmax_new_tokens = 8", "master = 7"
THRESHOLD = "insignificance_threshold = 0.05"

CASES: list[Hostile] = [
    # -- non-finite, negative and huge values in typed sections --------------------------------------------------
    Hostile("tau-nan", _edit(P, **{TAU: "tau = nan"}), "R14"),
    Hostile("tau-inf", _edit(P, **{TAU: "tau = inf"}), "R14"),
    Hostile("tau-1e-300", _edit(P, **{TAU: "tau = 1e-300"}), "R14"),
    Hostile("phi-negative", _edit(P, **{"phi = 0.5": "phi = -0.5"}), "R9"),
    Hostile("min-n-1e12", _edit(P, **{"min_n = 4": "min_n = 1000000000000"}), "R21"),
    Hostile("relearning-lr-nan", _edit(P, **{RELEARN_LR: "lr = nan\nmax_epochs = 1\nfirst"}), "C-W1"),
    Hostile("relearning-lr-neg-inf", _edit(P, **{RELEARN_LR: "lr = -inf\nmax_epochs = 1\nfirst"}), "C-W1"),
    Hostile("relearning-batch-0", _edit(P, **{RELEARN_BATCH: "batch_size = 0\nparams"}), "C-W5"),
    Hostile("relearning-budget-negative", _edit(P, **{BUDGETS: "budgets = [-4, 8]"}), "C-W1"),
    Hostile("relearning-budget-1e15", _edit(P, **{BUDGETS: "budgets = [4, 1000000000000000]"}), "C-W1"),
    Hostile(
        "relearning-checkpoint-nan", _edit(P, **{CHECKPOINTS: "first_epoch_checkpoints = [nan]"}), "C-W3"
    ),
    Hostile("install-lr-inf", _edit(P, **{INSTALL: INSTALL.replace("lr = 1e-3", "lr = inf")}), "R2"),
    Hostile(
        "install-epochs-1e12",
        _edit(P, **{INSTALL: INSTALL.replace("max_epochs = 1", "max_epochs = 1000000000000")}),
        "R2",
    ),
    Hostile(
        "install-batch-0", _edit(P, **{INSTALL: INSTALL.replace("batch_size = 16", "batch_size = 0")}), "R23"
    ),
    Hostile("seed-negative", _edit(P, **{SEED: "master = -7"}), "R23"),
    Hostile("seed-2-to-the-60", _edit(P, **{SEED: "master = 1152921504606846976"}), "R23"),
    Hostile("class-d-threshold-nan", _edit(P, **{THRESHOLD: "insignificance_threshold = nan"}), "D-5.1"),
    Hostile("class-d-threshold-tiny", _edit(P, **{THRESHOLD: "insignificance_threshold = 1e-300"}), "D-5.1"),
    Hostile("mint-entities-1e15", _mint(P, "entities = 1000000000000000"), "R2"),
    Hostile("mint-controls-negative", _mint(P, "entities = 8\ncontrols = -1"), "D4"),
    # -- free-form parameter tables ------------------------------------------------------------------------------
    Hostile("method-lr-nan", _edit(P, **{METHOD: "lr = nan, epochs = 1"}), "R23"),
    Hostile("method-epochs-negative", _edit(P, **{METHOD: "lr = 1e-4, epochs = -1"}), "R23"),
    Hostile(
        "method-weight-decay-string", _edit(P, **{"warmup_epochs = 0.0": 'weight_decay = "none"'}), "R23"
    ),
    Hostile("method-param-misspelt", _edit(P, **{"warmup_epochs = 0.0": "warmup_epochz = 0.0"}), "R23"),
    Hostile("method-schedule-unknown", _edit(P, **{"warmup_epochs = 0.0": 'schedule = "wobbly"'}), "R23"),
    Hostile("attack-shots-1e12", _edit(P, **{SHOTS: "shots = 1000000000000"}), "R14"),
    Hostile("attack-shots-negative", _edit(P, **{SHOTS: "shots = -2"}), "R14"),
    Hostile("attack-shots-float", _edit(P, **{SHOTS: "shots = 2.5"}), "R14"),
    Hostile("attack-tokens-0", _edit(P, **{SHOTS: "shots = 2, max_new_tokens = 0"}), "R14"),
    Hostile("attack-samples-inf", _edit(P, **{SAMPLES: "n_samples = inf, ks = [1, 8]"}), "R14"),
    Hostile("attack-ks-nan", _edit(P, **{SAMPLES: "n_samples = 8, ks = [1, nan]"}), "R14"),
    Hostile("attack-ks-beyond-samples", _edit(P, **{SAMPLES: "n_samples = 8, ks = [1, 80]"}), "R14"),
    Hostile("attack-param-misspelt", _edit(P, **{SHOTS: "shotz = 2"}), "R14"),
    Hostile("attack-param-wrong-type", _edit(P, **{SHOTS: 'shots = 2, use_prefix_cache = "yes"'}), "R14"),
    Hostile("attack-param-date", _edit(P, **{SHOTS: "shots = 2, when = 2025-01-01"}), "R14"),
    Hostile("attack-unknown", _appended(P, "\n[attacks.fuzz]\nparams = { rounds = 3 }\n"), "R14"),
    Hostile(
        "utility-tokens-0",
        _edit(P, **{UTILITY_PARAMS: "[utility.params.retain_kappa]\nmax_new_tokens = 0"}),
        "R23",
    ),
    Hostile(
        "utility-param-misspelt",
        _edit(P, **{UTILITY_PARAMS: "[utility.params.retain_kappa]\nmax_new_tokenz = 8"}),
        "R9",
    ),
    Hostile(
        "relearn-param-tokens-negative",
        _edit(
            P,
            **{
                "params = { max_new_tokens = 8 }\n\n[attacks.prefill]": "params = { max_new_tokens = -8 }\n\n[attacks.prefill]"
            },
        ),
        "C-W5",
    ),
    Hostile(
        "relearn-param-unknown",
        _edit(
            P,
            **{
                "params = { max_new_tokens = 8 }\n\n[attacks.prefill]": "params = { momentum = 0.9 }\n\n[attacks.prefill]"
            },
        ),
        "C-W1",
    ),
    # -- wrong types, unknown keys, malformed TOML and files -----------------------------------------------------
    Hostile("tau-quoted", _edit(P, **{TAU: 'tau = "0.5"'}), "R14"),
    Hostile("seed-as-list", _edit(P, **{SEED: "master = [7]"}), "R23"),
    Hostile("unknown-top-level-key", _edit(P, **{TAU: "tau = 0.5\ntua = 0.5"}), "R14"),
    Hostile("unknown-claim-key", _edit(P, **{"[claim]\n": '[claim]\nscope = "everything"\n'}), "R1"),
    Hostile("duplicate-toml-key", _edit(P, **{TAU: "tau = 0.5\ntau = 0.9"}), "R14"),
    Hostile(
        "nested-too-deep",
        _appended(P, "\n[attacks.prefill.params.x]\ny = " + "[" * 100 + "]" * 100 + "\n"),
        "R14",
    ),
    Hostile("not-toml", _raw(P, b"class = \n"), "R14"),
    Hostile("empty-file", _raw(P, b""), "R1"),
    Hostile("not-utf8", _raw(P, b'tau = 0.5\nclaim = "\xff\xfe"\n'), "R14"),
    Hostile("config-is-a-folder", _raw(P, None, folder=True), "R14"),
    Hostile("config-missing", _raw(P, None), "R14"),
    Hostile("out-is-a-file", _out_is_a_file, "R14"),
    Hostile("out-below-a-file", _out_below_a_file, "R14"),
    # -- remnant plan: refused before anything is minted or estimated --------------------------------------------
    Hostile("plan-mint-entities-1e15", _mint(PLAN, "entities = 1000000000000000"), "R2"),
    Hostile("plan-mint-entities-over-limit", _mint(PLAN, "entities = 5001"), "R2"),
    Hostile("plan-mint-controls-1e15", _mint(PLAN, "entities = 8\ncontrols = 1000000000000000"), "D4"),
    Hostile("plan-mint-repetitions-1e9", _mint(PLAN, "entities = 8\nrepetitions = 1000000000"), "D5"),
    Hostile("plan-tau-1e-300", _edit(PLAN, **{TAU: "tau = 1e-300"}), "R14"),
    Hostile("plan-method-epochs-string", _edit(PLAN, **{METHOD: 'lr = 1e-4, epochs = "many"'}), "R23"),
    Hostile("plan-shots-1e12", _edit(PLAN, **{SHOTS: "shots = 1000000000000"}), "R14"),
    Hostile("plan-samples-nan", _edit(PLAN, **{SAMPLES: "n_samples = nan, ks = [1, 8]"}), "R14"),
    Hostile("plan-budgets-too-many", _edit(PLAN, **{BUDGETS: f"budgets = {list(range(1, 100))}"}), "C-W1"),
    Hostile(
        "plan-relearning-epochs-1e9",
        _edit(PLAN, **{"max_epochs = 1\nfirst": "max_epochs = 1000000000\nfirst"}),
        "C-W1",
    ),
    Hostile("plan-config-is-a-folder", _raw(PLAN, None, folder=True), "R14"),
    Hostile("plan-duplicate-toml-key", _edit(PLAN, **{TAU: "tau = 0.5\ntau = 0.9"}), "R14"),
]


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_hostile_config(case: Hostile, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    check(case, tmp_path, capsys)
    assert not (tmp_path / "run" / "prereg.json").exists()  # nothing frozen


def test_enough_cases() -> None:
    assert len(CASES) >= 35
    assert sum(1 for c in CASES if c.id.startswith("plan-")) >= 10


@pytest.mark.parametrize("command", [P, PLAN])
def test_the_untouched_config_is_accepted(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each case's starting point passes (exit 0), so each refusal above is its edit's doing."""
    from remnant.cli import main

    argv, _ = _edit(command)(tmp_path)
    assert main(argv) == 0, capsys.readouterr().err
    argv, _ = _mint(command, "entities = 8\ncontrols = 1")(tmp_path / "minting")
    assert main(argv) == 0, capsys.readouterr().err
