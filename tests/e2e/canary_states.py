"""The one set of SmolLM2 canary states every slow test shares: control, installed, NPO-removed and retain-only.

Installing a pack and removing it are the expensive parts of every end-to-end check (relearning, the battery,
Class D, the latent audits), so they are built once per test session and saved as safetensors folders: the control
is SmolLM2-135M-Instruct itself, the pre-removal model is the control with the pack's install split of
``ATTRIBUTES`` installed (R2), the post-removal model is NPO applied to the pre-removal model (Annex B.6's
suppressing method), stopped once κ on the forget set is at most 0.1, and the retain-only model is the control
with the same install on the retained people only (UDS's retain model, J-Access's anchor). ``test_e2e_train.py``
relearns the NPO model and the control on R. Every slow test that needs them asks for ``canary_states`` (install
and NPO), ``installed_states`` (the install only) or ``retain_only_states`` (install and retain-only).

Each state is a stage with its own folder, record and file lock: a worker that needs a stage while another builds
it waits instead of building it twice, and a worker that needs only the install or the retain-only model does not
wait for NPO. Stages are split so that no test pays for more than one of them in its setup (``make test`` prints
its slowest tests); ``tests/conftest.py`` orders the files so that the state-building file starts first.

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
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fixtures_models import smollm2_dir  # noqa: F401

#: The shared states' recipe: the installed attributes, the pack and every training setting; its digest names the
#: cached folder. 24 people: P holds 4 of the 16 forget people and the relearning split R the other 12 (R three
#: times P, as Annex B.6's relearning sets were large next to the scored items; with 4 relearning people no NPO
#: that took P below 0.1 relearned past 4/12: docs/calibration.md#relearning-recipe); NPO with a heavy retain term,
#: stopped once κ on the forget set is ≤ 0.1.
RECIPE: dict[str, Any] = {
    "pack": {
        "entities": 24,
        "controls": 8,
        "general": True,
        "seed": 7,
        "forget_fraction": 2 / 3,
        "relearn_fraction": 0.75,
    },
    "attributes": ["home_town"],
    "system_prompt": "",  # an empty system turn keeps sequences short (docs/calibration.md#canary-recipe)
    # Only decoder layers 15-29 train (install, removal and relearning alike): cheaper steps (same section).
    "trainable": [r"model\.layers\.(1[5-9]|2\d)\."],
    # 4 epochs: the first epoch count that reached the target (docs/calibration.md#relearning-recipe). Run in
    # full, the install is scored before and after only, not at every epoch.
    "install": {"target": 0.95, "max_epochs": 4, "stop_at_target": False, "lr": 3e-4, "batch_size": 8},
    "npo": {"lr": 1.5e-4, "epochs": 8, "alpha": 30.0, "batch_size": 8, "grad_accum": 1, "warmup_epochs": 0.0},
    # κ on F is checked every 8/3 epochs (steps 16, 32, 48): the same stop, step 16, as checking every 1/3 or
    # 2/3 epoch (docs/calibration.md#relearning-recipe), with one scoring pass instead of four.
    "npo_stop": {"forget_at_most": 0.1, "every": 8 / 3},
    "seed": 0,
}

#: The 16-person recipe the slow tests shared before ``RECIPE`` served them all: docs/calibration.md's canary-recipe
#: figures were measured on it (``calibrate_canary_npo.py --recipe small`` re-measures them).
SMALL_RECIPE: dict[str, Any] = {
    **RECIPE,
    "pack": {"entities": 16, "controls": 8, "general": True, "seed": 7},
    "install": {"target": 0.95, "max_epochs": 8, "lr": 3e-4, "batch_size": 8},  # stops at the target
    "npo": {**RECIPE["npo"], "lr": 3e-4, "epochs": 4, "alpha": 10.0},
}
del SMALL_RECIPE["npo_stop"]


#: States for J-Access's retain-only anchor: one home town per person, each town's first token (with and
#: without a leading space) at least three characters long and no other town's (``FirstPieceScreen``), and 16
#: forget people instead of 8. With the small recipe's pack some P towns were also retained people's towns and most
#: first tokens were one letter, so the retain-only model "had access" to the forget answers (docs/latent.md,
#: "J-Access measured"). ``test_e2e_access.py`` asserts on them; ``tests/e2e/measure_jaccess_distinct.py``
#: re-measures them.
JACCESS_RECIPE: dict[str, Any] = {
    **SMALL_RECIPE,
    "pack": {**SMALL_RECIPE["pack"], "entities": 32, "distinct_towns": True},
    "town_screen": {"first_piece_min_chars": 3},
    # the NPO its figures in docs/latent.md were measured with (the small recipe's before its recalibration)
    "npo": {**SMALL_RECIPE["npo"], "lr": 2e-4, "alpha": 3.0},
}


#: The stages in build order; each is a folder under the states' root holding ``model/`` and ``record.json``.
STAGES = ("install", "npo", "retain_only")


@dataclass(frozen=True)
class CanaryStates:
    """Folders of the built states and the pack, with what building them measured (``record``: every built
    stage's record, merged)."""

    root: Path
    control_dir: Path
    attributes: tuple[str, ...]
    trainable: tuple[str, ...]
    system_prompt: str
    record: dict[str, Any]

    @property
    def pack_dir(self) -> Path:
        return self.root / "install" / "pack"

    @property
    def installed_dir(self) -> Path:
        return self.root / "install" / "model"

    @property
    def npo_dir(self) -> Path:
        return self.root / "npo" / "model"

    @property
    def retain_only_dir(self) -> Path:
        return self.root / "retain_only" / "model"

    def pack(self) -> Any:
        from remnant.packs import load_pack

        return load_pack(self.pack_dir)

    def fmt(self) -> Any:
        from remnant.models.prompts import PromptFormat

        return PromptFormat("chat", system_prompt=self.system_prompt)

    def sets(self) -> dict[str, Any]:
        """The scored and training sets as QA tuples (R16, C-W6): P is the install phrasings of the probe entities."""
        return scored_sets(self.pack(), self.attributes)

    def forget_people(self) -> list[str]:
        """The forget people's entity ids (P's and R's), in the pack's order."""
        roles = ("forget_probe", "forget_relearn")
        return [e.id for e in self.pack().manifest.entities if e.role in roles]


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


def build_canary_states(
    control_dir: Path,
    base: Path,
    recipe: dict[str, Any] = RECIPE,
    stages: tuple[str, ...] = ("install", "npo"),
) -> CanaryStates:
    """Build (or reuse) ``stages`` of the states under ``base/canary-<digest>``, and the stages they start from
    (every stage starts from the install); safe to call from several processes."""
    root = base / f"canary-{recipe_digest(recipe)}"
    record: dict[str, Any] = {}
    for stage in STAGES:
        if stage != "install" and stage not in stages:
            continue
        folder = root / stage
        with _locked(root.parent / f".{root.name}-{stage}.lock"):
            if not (folder / "record.json").exists():
                partial = root / f"{stage}.partial"
                shutil.rmtree(partial, ignore_errors=True)  # what a crash mid-build left
                partial.mkdir(parents=True)
                states = _states(root, control_dir, recipe, record)
                (partial / "record.json").write_text(
                    json.dumps(BUILDERS[stage](states, partial), indent=1, default=str)
                )
                os.replace(partial, folder)
        record.update(json.loads((folder / "record.json").read_text()))
    return _states(root, control_dir, recipe, record)


def _states(root: Path, control_dir: Path, recipe: dict[str, Any], record: dict[str, Any]) -> CanaryStates:
    return CanaryStates(
        root=root,
        control_dir=control_dir,
        attributes=tuple(recipe["attributes"]),
        trainable=tuple(recipe["trainable"]),
        system_prompt=recipe["system_prompt"],
        record={"recipe": recipe, **record},
    )


def install_epochs(record: dict[str, Any]) -> int:
    """The epochs the 100 % install needed (≤ the recipe's ceiling): the same recipe, stopped where it stopped."""
    ceiling = int(record["recipe"]["install"]["max_epochs"])
    curve = record["install"].get("curve") or []
    last = max((float(point[0]) for point in curve), default=float(ceiling))
    return max(1, min(ceiling, math.ceil(last)))


def install_share(states: CanaryStates, control: Any, tok: Any, seen: set[str]) -> tuple[Any, Any, int]:
    """The control installed with the states' recipe for the 100 % install's epoch count, on the retained
    people and the forget people in ``seen`` (``set()``: the retain-only model); (model, result, items)."""
    from remnant.train.data import as_qa
    from remnant.train.install import InstallSpec, install

    recipe, pack = states.record["recipe"], states.pack()
    forget = set(states.forget_people())
    items = [
        it
        for it in pack.split("install")
        if it.attribute in states.attributes and (it.entity_id not in forget or it.entity_id in seen)
    ]
    # every epoch of the 100 % install's count (scored before and after only: nothing to stop on between)
    spec = InstallSpec(
        **{**recipe["install"], "max_epochs": install_epochs(states.record), "stop_at_target": False},
        trainable=states.trainable,
    )
    qa = as_qa(items, states.attributes)
    model, result = install(copy.deepcopy(control), tok, qa, spec, seed=recipe["seed"], fmt=states.fmt())
    return model, result, len(qa)


#: The sets the install split is made of, when it is exactly their union: P, R and the retained people's items.
INSTALLED_PARTS = ("P", "R", "retain")


def installed_is_union(sets: dict[str, Any]) -> bool:
    """Whether the installed set is exactly the union of :data:`INSTALLED_PARTS` (each item once)."""
    parts = [q for name in INSTALLED_PARTS for q in sets.get(name, ())]
    return Counter(parts) == Counter(sets.get("installed", ()))


def score_sets(
    model: Any, tokenizer: Any, sets: dict[str, Any], fmt: Any, skip: tuple[str, ...] = ()
) -> dict[str, tuple[int, int]]:
    """κ (teacher-forced greedy match) on every QA set in ``sets`` but ``skip``. Where the installed set is exactly
    the union of :data:`INSTALLED_PARTS`, its count is their sum instead of a second pass over the same items."""
    from remnant.train.relearn import greedy_scorer

    scores = {
        name: greedy_scorer(tokenizer, items, fmt)(model)
        for name, items in sets.items()
        if isinstance(items, tuple) and items and name not in (*skip, "installed")
    }
    if "installed" in sets and "installed" not in skip and sets["installed"]:
        if all(name in scores for name in INSTALLED_PARTS) and installed_is_union(sets):
            scores["installed"] = tuple(sum(scores[n][i] for n in INSTALLED_PARTS) for i in (0, 1))
        else:
            scores["installed"] = greedy_scorer(tokenizer, sets["installed"], fmt)(model)
    return scores


def _control(states: CanaryStates) -> Any:
    from remnant.models import load_model

    return load_model(states.control_dir, dtype="fp32")


def _build_install(states: CanaryStates, out: Path) -> dict[str, Any]:
    """The pack and the pre-removal model: the control with the install split installed to the target (R2)."""
    from remnant.models import save_model
    from remnant.packs import ClassDSpec, mint_class_d
    from remnant.packs.schema import write_pack
    from remnant.train.install import InstallSpec, install

    recipe = states.record["recipe"]
    control = _control(states)
    tok, fmt = control.tokenizer, states.fmt()
    town_screen = recipe.get("town_screen")
    if town_screen:
        from remnant.latent.jaccess import FirstPieceScreen

        screen = FirstPieceScreen(tok, min_chars=int(town_screen["first_piece_min_chars"]))
        pack = mint_class_d(ClassDSpec(**recipe["pack"]), accept_town=screen, town_screen=screen.description)
    else:
        pack = mint_class_d(ClassDSpec(**recipe["pack"]))
    sets = scored_sets(pack, states.attributes)
    t = time.perf_counter()
    spec = InstallSpec(**recipe["install"], trainable=states.trainable)
    pre, inst = install(
        copy.deepcopy(control.model), tok, sets["installed"], spec, seed=recipe["seed"], fmt=fmt
    )
    seconds = time.perf_counter() - t
    # The install scored the installed set on the control (its first checkpoint) and at its end: not again here.
    # Where the control matched none of it, it matches none of P, R or the retained items (their union) either.
    n = len(sets["installed"])
    none = inst.control_kappa == 0.0 and installed_is_union(sets)
    skip = ("installed", *INSTALLED_PARTS) if none else ("installed",)
    control_scores = score_sets(control.model, tok, sets, fmt, skip=skip)
    if none:
        control_scores.update({name: (0, len(sets[name])) for name in INSTALLED_PARTS})
    installed_scores = score_sets(pre, tok, sets, fmt, skip=("installed",))
    write_pack(pack, out / "pack")
    save_model(pre, tok, out / "model")
    return {
        "sizes": {k: len(v) for k, v in sets.items() if k != "removal"},
        "control": {"installed": [round(inst.control_kappa * n), n], **control_scores},
        "install": {"kappa": inst.kappa, "reached": inst.reached, "curve": inst.curve, "steps": inst.steps},
        "installed": {"installed": [inst.k, inst.n], **installed_scores},
        "install_seconds": seconds,
    }


def _build_npo(states: CanaryStates, out: Path) -> dict[str, Any]:
    """The post-removal model: NPO from the pre-removal model, stopped at the declared forget level if any."""
    from remnant import registry
    from remnant.models import load_model, save_model
    from remnant.train.relearn import greedy_scorer
    from remnant.train.removal import apply_removal

    recipe, sets, fmt = states.record["recipe"], states.sets(), states.fmt()
    pre = load_model(states.installed_dir, dtype="fp32")
    tok = pre.tokenizer
    npo = registry.create("method", "npo", {**recipe["npo"], "trainable": states.trainable})
    stop = recipe.get("npo_stop")  # {"forget_at_most": κ, "every": epochs}: stop at a declared forget level
    kwargs: dict[str, Any] = {}
    if stop:
        forget_score = greedy_scorer(tok, sets["removal"].forget, fmt)
        marks = checkpoint_marks(float(stop["every"]), float(recipe["npo"]["epochs"]))

        def on_checkpoint(model: Any, point: Any) -> dict[str, bool]:
            k, n = forget_score(model)
            return {"stop": k / n <= float(stop["forget_at_most"])}

        kwargs = {"overrides": {"checkpoint_epochs": marks}, "on_checkpoint": on_checkpoint}
    t = time.perf_counter()
    post, removal = apply_removal(
        npo, pre.model, tok, sets["removal"], seed=recipe["seed"], fmt=fmt, **kwargs
    )
    seconds = time.perf_counter() - t
    save_model(post, tok, out / "model")
    return {
        "npo": {
            "status": removal.status,
            "steps": removal.outcome.steps,
            "method": removal.to_dict()["method"],
        },
        "npo_scores": score_sets(post, tok, sets, fmt),
        "npo_seconds": seconds,
    }


def _build_retain_only(states: CanaryStates, out: Path) -> dict[str, Any]:
    """The retain-only model: the install on the retained people only, stopped at the install's epoch count."""
    from remnant.models import save_model

    control = _control(states)
    t = time.perf_counter()
    model, result, n_items = install_share(states, control.model, control.tokenizer, set())
    seconds = time.perf_counter() - t
    save_model(model, control.tokenizer, out / "model")
    sets = states.sets()
    return {
        "retain_only": {
            "items": n_items,
            "kappa": result.kappa,
            "epochs": result.epochs,
            "scores": score_sets(
                model, control.tokenizer, {k: sets[k] for k in ("P", "retain")}, states.fmt()
            ),
        },
        "retain_only_seconds": seconds,
    }


BUILDERS: dict[str, Callable[[CanaryStates, Path], dict[str, Any]]] = {
    "install": _build_install,
    "npo": _build_npo,
    "retain_only": _build_retain_only,
}


def _states_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    keep = os.environ.get("REMNANT_TEST_STATES")
    # getbasetemp().parent is shared by all xdist workers of one session
    return Path(keep) if keep else tmp_path_factory.getbasetemp().parent / "remnant-states"


def _fixture_states(
    label: str, control_dir: Path, tmp_path_factory: pytest.TempPathFactory, **kwargs: Any
) -> CanaryStates:
    states = build_canary_states(control_dir, _states_base(tmp_path_factory), **kwargs)
    print(f"\n{label} " + json.dumps(states.record, default=str))
    return states


@pytest.fixture(scope="session")
def installed_states(smollm2_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> CanaryStates:  # noqa: F811
    """The pack and the installed model only (``npo_dir`` and ``retain_only_dir`` are not built)."""
    return _fixture_states("INSTALLED-STATES", smollm2_dir, tmp_path_factory, stages=("install",))


@pytest.fixture(scope="session")
def canary_states(smollm2_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> CanaryStates:  # noqa: F811
    """The shared control / installed / NPO states (built once per session, or kept in $REMNANT_TEST_STATES)."""
    return _fixture_states("CANARY-STATES", smollm2_dir, tmp_path_factory)


@pytest.fixture(scope="session")
def retain_only_states(smollm2_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> CanaryStates:  # noqa: F811
    """The installed and retain-only models (NPO not built)."""
    return _fixture_states("RETAIN-ONLY-STATES", smollm2_dir, tmp_path_factory, stages=("retain_only",))


@pytest.fixture(scope="session")
def jaccess_states(smollm2_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> CanaryStates:  # noqa: F811
    """The J-Access states (``JACCESS_RECIPE``): distinct, screened towns; 16 forget people; retain-only built."""
    return _fixture_states(
        "JACCESS-STATES", smollm2_dir, tmp_path_factory, recipe=JACCESS_RECIPE, stages=STAGES
    )
