"""The SmolLM2 canary states every slow test shares: control, installed (pre-removal) and NPO-removed.

Installing a pack and removing it are the expensive parts of every end-to-end check (relearning, the battery,
Class D, J-Access), so they are built once per test session and saved as safetensors folders: the control is
SmolLM2-135M-Instruct itself, the pre-removal model is the control with the pack's install split of
``ATTRIBUTES`` installed (R2), and the post-removal model is NPO applied to the pre-removal model (Annex B.6's
suppressing method). Every slow test that needs them asks for the ``canary_states`` fixture. ``make test``
runs ``--dist loadfile``, which keeps each file (and its module fixtures) on one worker; the
``xdist_group("smollm2")`` marks are inert there (and under ``--dist loadgroup`` pytest-xdist 3.8 sets
``item._nodeid``, which pytest 9.2 no longer reads, so groups are silently ignored anyway). A file lock makes
a worker that needs the states while another builds them wait instead of building the same states twice
(``tests/conftest.py`` orders the files so that neither worker starts by waiting).

The relearning test (``test_e2e_train.py``) has its own states (``relearn_states``, ``RELEARN_RECIPE``): the
same install recipe on a larger pack whose relearning split holds 12 people, and an NPO that stops at a
declared forget level; the other slow tests keep ``RECIPE``'s states, so their measured figures stand.

``REMNANT_TEST_STATES=<dir>`` keeps the states between sessions (for iterating on one test); the folder name
carries a digest of the recipe, so changing the recipe rebuilds rather than reusing stale states.
"""

from __future__ import annotations

import copy
import fcntl
import hashlib
import json
import math
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fixtures_models import smollm2_dir  # noqa: F401

#: The installed attributes, the pack and every training setting; its digest names the cached folder.
RECIPE: dict[str, Any] = {
    "pack": {"entities": 16, "controls": 8, "general": True, "seed": 7},
    "attributes": ["home_town"],
    "system_prompt": "",  # an empty system turn keeps sequences short (docs/calibration.md#canary-recipe)
    # Only decoder layers 15-29 train (install, removal and relearning alike): cheaper steps (same section).
    "trainable": [r"model\.layers\.(1[5-9]|2\d)\."],
    "install": {"target": 0.95, "max_epochs": 8, "lr": 3e-4, "batch_size": 8},
    # NPO on home towns (birth years share their tokens, so NPO on some bled into all), at the learning rate and
    # retain weight that take P to zero and keep the trained retain set (calibrated on this install's training
    # order: docs/calibration.md#canary-recipe; re-measure with tests/e2e/calibrate_canary_npo.py).
    "npo": {"lr": 3e-4, "epochs": 4, "alpha": 10.0, "batch_size": 8, "grad_accum": 1, "warmup_epochs": 0.0},
    "seed": 0,
}


#: The relearning test's states (``test_e2e_train.py``): the same install, a larger pack whose relearning
#: split R holds 12 of the 16 forget people (P the other 4), and NPO with a heavier retain term that stops
#: once κ on the forget set is ≤ 0.1. ``RECIPE``'s 4 relearning people revived too little of P once NPO had
#: taken it below 0.1 (docs/calibration.md#relearning-recipe); here R is three times larger, as Annex B.6's
#: relearning sets were large next to the scored items.
RELEARN_RECIPE: dict[str, Any] = {
    **RECIPE,
    "pack": {**RECIPE["pack"], "entities": 24, "forget_fraction": 2 / 3, "relearn_fraction": 0.75},
    "npo": {**RECIPE["npo"], "lr": 1.5e-4, "epochs": 8, "alpha": 30.0},
    "npo_stop": {"forget_at_most": 0.1, "every": 1 / 3},
}


#: States for J-Access's retain-only anchor: one home town per person, each town's first token (with and
#: without a leading space) at least three characters long and no other town's (``FirstPieceScreen``), and 16
#: forget people instead of 8. With ``RECIPE``'s pack some P towns were also retained people's towns and most
#: first tokens were one letter, so the retain-only model "had access" to the forget answers (docs/latent.md,
#: "J-Access measured"). ``test_e2e_access.py`` asserts on them; ``tests/e2e/measure_jaccess_distinct.py``
#: re-measures them.
JACCESS_RECIPE: dict[str, Any] = {
    **RECIPE,
    "pack": {**RECIPE["pack"], "entities": 32, "distinct_towns": True},
    "town_screen": {"first_piece_min_chars": 3},
    # the NPO its figures in docs/latent.md were measured with (RECIPE's before its recalibration)
    "npo": {**RECIPE["npo"], "lr": 2e-4, "alpha": 3.0},
}


@dataclass(frozen=True)
class CanaryStates:
    """Folders of the three states and the pack, with what building them measured."""

    root: Path
    pack_dir: Path
    control_dir: Path
    installed_dir: Path
    npo_dir: Path
    attributes: tuple[str, ...]
    trainable: tuple[str, ...]
    system_prompt: str
    record: dict[str, Any]

    def pack(self) -> Any:
        from remnant.packs import load_pack

        return load_pack(self.pack_dir)

    def fmt(self) -> Any:
        from remnant.models.prompts import PromptFormat

        return PromptFormat("chat", system_prompt=self.system_prompt)

    def sets(self) -> dict[str, Any]:
        """The scored and training sets as QA tuples (R16, C-W6): P is the install phrasings of the probe entities."""
        return scored_sets(self.pack(), self.attributes)


def scored_sets(pack: Any, attributes: tuple[str, ...]) -> dict[str, Any]:
    from remnant.train.data import as_qa, removal_data, retain_training_qa, split_qa

    probe_entities = {e.id for e in pack.manifest.entities if e.role == "forget_probe"}
    return {
        "installed": split_qa(pack, "install", attributes),
        "P": as_qa([it for it in pack.split("install") if it.entity_id in probe_entities], attributes),
        "P_heldout_phrasing": split_qa(pack, "probe", attributes),
        "retain": retain_training_qa(pack, attributes),
        "retain_heldout_phrasing": split_qa(pack, "retain", attributes),
        "controls": split_qa(pack, "controls", attributes),
        "R": split_qa(pack, "relearn", attributes),
        "removal": removal_data(pack, attributes),
    }


def relearn_spec(states: CanaryStates, lr: float = 3e-4, epochs: int = 3) -> Any:
    """The relearning procedure ``test_e2e_train.py`` and the calibration script run on these states (C-W1,
    C-W3): budgets of 4 and 12 examples and, where R holds more, all of R."""
    from remnant.train.relearn import RelearnSpec

    n_r = states.record["sizes"]["R"]
    return RelearnSpec(
        budgets=tuple(b for b in (4, 12) if b < n_r) + (n_r,),
        lr=lr,
        epochs=epochs,
        checkpoint_epochs=(0.25, 0.5),
        batch_size=2,
        trainable=states.trainable,
        tau=0.5,
    )


def checkpoint_marks(every: float, epochs: float) -> tuple[float, ...]:
    """Checkpoints every ``every`` epochs up to ``epochs``: where a removal that stops at a forget level is scored."""
    return tuple(round(every * i, 4) for i in range(1, int(epochs / every + 1e-9) + 1))


def recipe_digest(recipe: dict[str, Any] = RECIPE) -> str:
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:12]


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def build_canary_states(control_dir: Path, base: Path, recipe: dict[str, Any] = RECIPE) -> CanaryStates:
    """Build (or reuse) the states under ``base/canary-<digest>``; safe to call from several processes."""
    root = base / f"canary-{recipe_digest(recipe)}"
    with _locked(base / f".canary-{recipe_digest(recipe)}.lock"):
        if not (root / "record.json").exists():
            _build(control_dir, root, recipe)
    record = json.loads((root / "record.json").read_text())
    return CanaryStates(
        root=root,
        pack_dir=root / "pack",
        control_dir=control_dir,
        installed_dir=root / "installed",
        npo_dir=root / "npo",
        attributes=tuple(recipe["attributes"]),
        trainable=tuple(recipe["trainable"]),
        system_prompt=recipe["system_prompt"],
        record=record,
    )


def install_epochs(record: dict[str, Any]) -> int:
    """The epochs the 100 % install needed (≤ the recipe's ceiling): the same recipe, stopped where it stopped."""
    ceiling = int(record["recipe"]["install"]["max_epochs"])
    curve = record["install"].get("curve") or []
    last = max((float(point[0]) for point in curve), default=float(ceiling))
    return max(1, min(ceiling, math.ceil(last)))


def install_share(states: CanaryStates, control: Any, tok: Any, seen: set[str]) -> tuple[Any, Any, int]:
    """The control installed with the states' recipe, stopped at the 100 % install's epoch count, on the retained
    people and the forget people in ``seen`` (``set()``: the retain-only model); (model, result, items)."""
    from remnant.train.data import as_qa
    from remnant.train.install import InstallSpec, install

    recipe, pack = states.record["recipe"], states.pack()
    forget = {e.id for e in pack.manifest.entities if e.role in ("forget_probe", "forget_relearn")}
    items = [
        it
        for it in pack.split("install")
        if it.attribute in states.attributes and (it.entity_id not in forget or it.entity_id in seen)
    ]
    spec = InstallSpec(
        **{**recipe["install"], "max_epochs": install_epochs(states.record)}, trainable=states.trainable
    )
    qa = as_qa(items, states.attributes)
    model, result = install(copy.deepcopy(control), tok, qa, spec, seed=recipe["seed"], fmt=states.fmt())
    return model, result, len(qa)


def score_sets(model: Any, tokenizer: Any, sets: dict[str, Any], fmt: Any) -> dict[str, tuple[int, int]]:
    """κ (teacher-forced greedy match) on every QA set in ``sets``."""
    from remnant.train.relearn import greedy_scorer

    return {
        name: greedy_scorer(tokenizer, items, fmt)(model)
        for name, items in sets.items()
        if isinstance(items, tuple) and items
    }


def _build(control_dir: Path, root: Path, recipe: dict[str, Any]) -> None:
    from remnant import registry
    from remnant.models import load_model, save_model
    from remnant.models.prompts import PromptFormat
    from remnant.packs import ClassDSpec, mint_class_d
    from remnant.packs.schema import write_pack
    from remnant.train.install import InstallSpec, install
    from remnant.train.relearn import greedy_scorer
    from remnant.train.removal import apply_removal

    attributes = tuple(recipe["attributes"])
    trainable = tuple(recipe["trainable"])
    timings: dict[str, float] = {}
    t = time.perf_counter()
    state = load_model(control_dir, dtype="fp32")
    tok, control = state.tokenizer, state.model
    fmt = PromptFormat("chat", system_prompt=recipe["system_prompt"])
    town_screen = recipe.get("town_screen")
    if town_screen:
        from remnant.latent.jaccess import FirstPieceScreen

        screen = FirstPieceScreen(tok, min_chars=int(town_screen["first_piece_min_chars"]))
        pack = mint_class_d(ClassDSpec(**recipe["pack"]), accept_town=screen, town_screen=screen.description)
    else:
        pack = mint_class_d(ClassDSpec(**recipe["pack"]))
    sets = scored_sets(pack, attributes)
    record: dict[str, Any] = {
        "recipe": recipe,
        "sizes": {k: len(v) for k, v in sets.items() if k != "removal"},
    }
    record["control"] = score_sets(control, tok, sets, fmt)

    t = time.perf_counter()
    spec = InstallSpec(**recipe["install"], trainable=trainable)
    pre, inst = install(copy.deepcopy(control), tok, sets["installed"], spec, seed=recipe["seed"], fmt=fmt)
    timings["install"] = time.perf_counter() - t
    record["install"] = {
        "kappa": inst.kappa,
        "reached": inst.reached,
        "curve": inst.curve,
        "steps": inst.steps,
    }
    record["installed"] = score_sets(pre, tok, sets, fmt)

    t = time.perf_counter()
    npo = registry.create("method", "npo", {**recipe["npo"], "trainable": trainable})
    stop = recipe.get("npo_stop")  # {"forget_at_most": κ, "every": epochs}: stop at a declared forget level
    kwargs: dict[str, Any] = {}
    if stop:
        forget_score = greedy_scorer(tok, sets["removal"].forget, fmt)
        marks = checkpoint_marks(float(stop["every"]), float(recipe["npo"]["epochs"]))

        def on_checkpoint(model: Any, point: Any) -> dict[str, bool]:
            k, n = forget_score(model)
            return {"stop": k / n <= float(stop["forget_at_most"])}

        kwargs = {"overrides": {"checkpoint_epochs": marks}, "on_checkpoint": on_checkpoint}
    post, removal = apply_removal(
        npo, copy.deepcopy(pre), tok, sets["removal"], seed=recipe["seed"], fmt=fmt, **kwargs
    )
    timings["npo"] = time.perf_counter() - t
    record["npo"] = {
        "status": removal.status,
        "steps": removal.outcome.steps,
        "method": removal.to_dict()["method"],
    }
    record["npo_scores"] = score_sets(post, tok, sets, fmt)
    record["timings"] = timings

    tmp = root.with_name(root.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    write_pack(pack, tmp / "pack")
    save_model(pre, tok, tmp / "installed")
    save_model(post, tok, tmp / "npo")
    (tmp / "record.json").write_text(json.dumps(record, indent=1, default=str))
    os.replace(
        tmp, root
    )  # a crash mid-build leaves only the .partial folder, which the next build overwrites


def _states_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    keep = os.environ.get("REMNANT_TEST_STATES")
    # getbasetemp().parent is shared by all xdist workers of one session
    return Path(keep) if keep else tmp_path_factory.getbasetemp().parent / "remnant-states"


@pytest.fixture(scope="session")
def relearn_states(smollm2_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> CanaryStates:  # noqa: F811
    """The relearning test's states (``RELEARN_RECIPE``): NPO stops at κ_F ≤ 0.1; R holds 12 people."""
    states = build_canary_states(smollm2_dir, _states_base(tmp_path_factory), RELEARN_RECIPE)
    print("\nRELEARN-STATES " + json.dumps(states.record, default=str))
    return states


@pytest.fixture(scope="session")
def canary_states(smollm2_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> CanaryStates:  # noqa: F811
    """The shared control / installed / NPO states (built once per session, or kept in $REMNANT_TEST_STATES)."""
    states = build_canary_states(smollm2_dir, _states_base(tmp_path_factory))
    print("\nCANARY-STATES " + json.dumps(states.record, default=str))
    return states


@pytest.fixture(scope="session")
def jaccess_states(smollm2_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> CanaryStates:  # noqa: F811
    """The J-Access states (``JACCESS_RECIPE``): distinct, screened towns; 16 forget people."""
    states = build_canary_states(smollm2_dir, _states_base(tmp_path_factory), JACCESS_RECIPE)
    print("\nJACCESS-STATES " + json.dumps(states.record, default=str))
    return states
