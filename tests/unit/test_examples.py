"""Every ``examples/*.toml`` passes what ``remnant assess`` checks before it touches a model (R14).

The examples are the configs people copy; a misspelt attack parameter or utility name in one of them would end
a user's first assessment with exit 2 (or, for a utility metric, after hours of installing and removing). So each
example goes through the real pre-model path of :func:`remnant.assess.run.assess` — config load (R14 fields),
``remnant plan``, pre-registration (R14), pack load or mint (R2, R18), the config held to the pre-registration
(R15), model-folder preflight (pickles refused), and :func:`prepare_inputs`, which creates every declared attack
through the registry with its exact parameters (C-Q1, R23) and validates the relearning procedure (C-W1) —
stopped at the point where assess would load the first model. Two checks assess makes only after its states
exist are made here too: each utility metric is created through the registry (R9), and the removal method is
bound to its parameters (R1c).

Paths an example names but cannot ship (a claimant's model folders and pack) get stand-ins in a temporary copy:
a folder holding a ``model.safetensors`` file (preflight only looks for the file) and a freshly minted pack of
the example's class. The full assessments are far too slow for a unit test (``remnant plan`` puts the Class D
example at hours of CPU time) and are not run.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from remnant import registry
from remnant.errors import ConfigError, RemnantError

_ALL = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.toml"))
#: Assessment configs; the pool specs (``sweep-*.toml``) are checked by tests/unit/sweep/test_sweep_spec.py, the
#: study configs (``study-*.toml``) below.
EXAMPLES = [p for p in _ALL if not p.name.startswith(("sweep-", "study-"))]
STUDIES = [p for p in _ALL if p.name.startswith("study-")]


@pytest.mark.parametrize("example", STUDIES, ids=lambda p: p.stem)
def test_study_example_loads_and_binds_a_pool_spec_of_this_folder(example: Path) -> None:
    """A study example is a valid config of its kind (R14), pre-registered against a pool spec: the digest it
    declares is that of a sweep spec shipped here (the value in force after the recorded deviation)."""
    import hashlib
    import tomllib

    from remnant.studies.config import load_config

    cfg = load_config(tomllib.loads(example.read_text(encoding="utf-8"))["study"], example)
    specs = {
        "sha256:" + hashlib.sha256(p.read_bytes()).hexdigest() for p in _ALL if p.name.startswith("sweep-")
    }
    assert cfg.pool_spec in specs


class _ReachedModels(Exception):
    """Raised where assess would start loading models: everything before it passed."""


def _stage_copy(example: Path, tmp_path: Path, text: str | None = None) -> Path:
    """Copy ``example`` into ``tmp_path`` and give its relative paths stand-ins (see module docstring)."""
    from remnant.config import load_config
    from remnant.packs import ClassDSpec, mint_class_c, mint_class_d, write_pack
    from remnant.packs.general import with_general

    config = tmp_path / example.name
    config.write_text(text if text is not None else example.read_text(encoding="utf-8"), encoding="utf-8")
    cfg = load_config(config)
    for spec in (cfg.models.control, cfg.models.pre_removal, cfg.models.post_removal):
        if spec.folder is not None:
            folder = cfg.resolve(spec.folder)
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "config.json").write_text("{}")
            (folder / "model.safetensors").write_bytes(b"")
    if cfg.target.pack is not None and not (cfg.resolve(cfg.target.pack) / "pack.json").is_file():
        pack = (
            with_general(mint_class_c(substances=40, seed=1))  # the example measures general_qa_kappa (R10)
            if cfg.claim_class == "C"
            else mint_class_d(ClassDSpec(entities=40, controls=10, seed=1))
        )
        write_pack(pack, cfg.resolve(cfg.target.pack))
    return config


def validate_before_models(config: Path, run: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Run ``config`` through assess up to its first model load; returns the attack slots it created."""
    from remnant.assess import run as run_module
    from remnant.assess.inputs import Inputs, utility_components
    from remnant.assess.plan import make_plan
    from remnant.config import load_config
    from remnant.prereg import freeze

    cfg = load_config(config)
    assert make_plan(cfg).cells > 0
    freeze(cfg, run)
    seen: dict[str, Inputs] = {}

    def stop(cfg: object, inputs: Inputs, run: Path, session: object) -> None:
        seen["inputs"] = inputs
        raise _ReachedModels

    monkeypatch.setattr(run_module, "_load_states", stop)
    with pytest.raises(_ReachedModels):
        run_module.assess(config, run, session=run_module.Session(progress=False, log=lambda _: None))
    inputs = seen["inputs"]
    # assess creates the utility metrics only after the states are built; a bad name must not wait that long.
    metrics = utility_components(cfg, inputs)
    assert [name for name, _, _ in metrics] == cfg.utility.metrics
    if cfg.models.post_removal.method is not None:
        registry.bind("method", cfg.models.post_removal.method, cfg.models.post_removal.params)
    return [name for name, attack, _, _ in inputs.attacks if attack is not None]


def test_there_are_examples() -> None:
    assert {p.name for p in EXAMPLES} >= {"classd-smollm2-npo.toml", "classc-claimant.toml"}


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_passes_assess_checks_before_any_model(
    example: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _stage_copy(example, tmp_path)
    created = validate_before_models(config, tmp_path / "run", monkeypatch)
    # C-Q1: the three required inference-time slots are declared and applicable to the example's pack.
    assert {"prefill", "many_shot", "repeated_sampling"} <= set(created)


# The misspellings the examples once held: each must turn validation red (so the test above can fail).
MISSPELLINGS = [
    ('metrics = ["retain_kappa"]', 'metrics = ["general_knowledge"]', "unknown utility 'general_knowledge'"),
    ('params = { source = "answer_stem" }', "params = { prefix_tokens = 4 }", "prefix_tokens"),
    ("params = { n_samples = 32,", "params = { samples = 32,", "samples"),
    ("ks = [1, 8, 32]", "ks = [1, 8, 50]", "every k in ks"),
    ("beta = 0.1 }", "betta = 0.1 }", "betta"),
]


@pytest.mark.parametrize(("old", "new", "message"), MISSPELLINGS, ids=[m[2] for m in MISSPELLINGS])
def test_a_misspelt_example_is_refused(
    old: str, new: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    example = next(p for p in EXAMPLES if p.name == "classd-smollm2-npo.toml")
    text = example.read_text(encoding="utf-8")
    assert old in text
    config = _stage_copy(example, tmp_path, text.replace(old, new, 1))
    with pytest.raises((ConfigError, RemnantError)) as info:
        validate_before_models(config, tmp_path / "run", monkeypatch)
    assert message in str(info.value)
    assert not (tmp_path / "run" / "states").exists()
    shutil.rmtree(tmp_path / "run", ignore_errors=True)
