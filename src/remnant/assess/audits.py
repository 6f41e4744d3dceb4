"""The white-box audits of an assessment: their components, inputs, extra states and plans (C-H6, C-H7).

``[audits.<table>]`` (:mod:`remnant.config.audits`) declares an audit; this module turns it into what the engine
runs (:class:`remnant.engine.audit.AuditPlan`):

- **components**, created through the registry up front (:func:`check_audits`), so a misspelt audit parameter is
  bad input (exit 2) before anything trains; at run time the UDS family reads the states in the prompt format they
  were trained in unless the table says otherwise (``prompt_format``, ``system_prompt``);
- **anchors** — the model with the target is the pre-removal model θ; the model that never saw it (UDS's retain
  model, J-Access's θ_g) is the never-modified control, or with ``reference = "retain_only"`` the control installed
  with the retained items only (the install recipe and seed, the removal split left out); direction survival reads
  the installed-minus-control direction (Annex B.3). Every figure names its anchors (C-H7b);
- **inputs**, from the pack alone and identical on every audited state: UDS's entity-span examples from P's items,
  J-Access's identity- or answer-level probes (calibration on the relearning people), direction survival's
  forget-domain prompts (Annex B.3, as ``remnant study latent-probe`` builds them);
- **extra states** (:func:`build_audit_states`): the retain-only model, and the Annex B control states of C-H7(c)
  — the removal procedure applied to the never-installed control and the control installed with the pack's
  content-shuffled twin, both as the study builds them — from the one states builder
  (:mod:`remnant.states.builder`), kept in ``STATES/ckpt/<digest>/`` like the three main states. A state that cannot be built is recorded
  as *not run* readings with the reason, never a crashed run.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from remnant.assess.inputs import Inputs
from remnant.config import AUDIT_TABLES, AssessmentConfig, AuditTable, audit_name, derive_seed
from remnant.engine.audit import REMOVED, AuditPlan
from remnant.engine.audit_base import Audit
from remnant.errors import ConfigError
from remnant.standard.vocabulary import CONTROL, POST, PRE
from remnant.states.builder import LoadedState, Made, StateBuilder

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from remnant.models.prompts import PromptFormat
    from remnant.states.recipe import Recipe

RETAIN_ONLY, PROCEDURE, CONTENT = "retain_only", "procedure_control", "content_control"
#: Audited state role -> the role its readings carry (C-H7c).
AUDITED_ROLES = {POST: REMOVED, PROCEDURE: PROCEDURE, CONTENT: CONTENT}
#: What a retain model stands for in a figure's reference (C-H7b).
REFERENCE_NOTES = {
    CONTROL: "; the never-modified control stands for a model that never saw the target",
    RETAIN_ONLY: "; the control installed with the retained items only (the install recipe and seed) stands for "
    "a model that never saw the target",
}
LATENT_CACHE = "latent-cache"

Built = LoadedState | str


def _refused(where: str, problem: str) -> ConfigError:
    return ConfigError(f"field '{where}' {problem}", requirement="C-H7")


def audit_class(table: str, spec: AuditTable) -> type[Audit]:
    """The registered audit class ``[audits.<table>]`` names, checked by its declarations (``Audit.family``,
    ``Audit.references``) against the table: a family the table admits, a retain model to choose only where the
    audit reads one, probes only for the J-Access family (ConfigError naming the field, C-H7)."""
    from remnant import registry

    name, where = audit_name(table, spec), f"audits.{table}"
    try:
        cls = registry.get("audit", name)
    except ConfigError as exc:
        raise _refused(f"{where}.implementation", f"is invalid: {exc}".removesuffix(" (R23)")) from None
    family, admitted = getattr(cls, "family", None), AUDIT_TABLES[table][1]
    if family not in admitted:
        runs = " or ".join(admitted)
        raise _refused(
            f"{where}.implementation", f"is {name!r}, a {family} audit; this table runs {runs} audits"
        )
    if spec.reference == "retain_only" and "retain" not in getattr(cls, "references", ()):
        raise _refused(f"{where}.reference", f"is 'retain_only'; {name} has no retain model to choose")
    if family != "jaccess" and "probes" in spec.model_fields_set:
        raise _refused(f"{where}.probes", f"applies to J-Access audits (family jaccess), not {name}")
    return cls


def _params(cls: type[Audit], spec: AuditTable, fmt: PromptFormat | None) -> dict[str, object]:
    """The audit's parameters; the UDS family reads in the states' own prompt format unless the table says."""
    params = dict(spec.params)
    if fmt is not None and cls.family == "uds":
        params.setdefault("prompt_format", "chat" if fmt.style == "chat" else "raw")
        if params["prompt_format"] == "chat":
            params.setdefault("system_prompt", fmt.system_prompt)
    return params


def create_audit(table: str, spec: AuditTable, fmt: PromptFormat | None = None) -> Audit:
    """The registered audit ``[audits.<table>]`` declares (:func:`audit_class`; ConfigError naming the field)."""
    from remnant.assess.params import create

    cls = audit_class(table, spec)
    audit: Audit = create(
        "audit",
        audit_name(table, spec),
        _params(cls, spec, fmt),
        field=f"audits.{table}.params",
        requirement="C-H7",
    )
    return audit


def check_audits(cfg: AssessmentConfig) -> None:
    """Create every enabled audit as a run would, with no model (``remnant preregister`` and ``assess``)."""
    for table, spec in cfg.audits.enabled().items():
        create_audit(table, spec)


def needed_states(cfg: AssessmentConfig) -> list[str]:
    """The extra states the enabled audits ask for, in build order."""
    tables = cfg.audits.enabled().values()
    out = [RETAIN_ONLY] if any(t.reference == RETAIN_ONLY for t in tables) else []
    return out + ([PROCEDURE, CONTENT] if any(t.controls for t in tables) else [])


def _make(
    role: str, cfg: AssessmentConfig, inputs: Inputs, builder: StateBuilder
) -> tuple[Recipe, Callable[[], Made]]:
    """The recipe of one extra state and how to train it from a copy of the control (never modified itself)."""
    master, origin = cfg.seeds.master, builder.origin
    if role == PROCEDURE:
        from remnant import registry

        post = cfg.models.post_removal
        assert post.method is not None  # config rule (C-H7)
        method = registry.create("method", post.method, post.params)
        seed = derive_seed(master, "removal")

        def procedure() -> Made:
            model, result = builder.removal(method, None, inputs.removal_data, seed=seed)
            source = f"removal {post.method} applied to the never-installed control"
            return Made(model, {"removal": result.to_dict()}, source)

        return origin.recipe("removal", {"method": method.spec.to_dict(), "seed": seed}), procedure
    from remnant.train.install import InstallSpec

    budget = cfg.models.pre_removal.install
    assert budget is not None  # config rule (C-H7): these states need the install recipe
    spec, seed = InstallSpec.from_budget(budget), derive_seed(master, "install")
    recipe = origin.recipe(
        "install", {"install": budget.model_dump(mode="json", exclude_none=True), "seed": seed, "items": role}
    )
    if role == CONTENT:
        return recipe, lambda: builder.twin(spec, seed=seed)

    def retain_only() -> Made:
        from remnant.train.data import retain_training_qa

        model, result = builder.install(retain_training_qa(inputs.pack), spec, seed=seed)
        return Made(model, {"install": result.to_dict()}, "the retained items installed into the control")

    return recipe, retain_only


def build_audit_states(
    cfg: AssessmentConfig,
    inputs: Inputs,
    builder: StateBuilder,
    *,
    log: Callable[[str], None] = lambda _t: None,
) -> dict[str, Built]:
    """Every extra state the audits ask for (:func:`needed_states`), from the states builder (loaded when saved
    before); a state that could not be built maps to the reason (its readings say *not run*)."""
    out: dict[str, Built] = {}
    name = builder.origin.state.name
    for role in needed_states(cfg):
        recipe, make = _make(role, cfg, inputs, builder)

        def logged(make: Callable[[], Made] = make, role: str = role) -> Made:
            log(
                f"audit state {role} (C-H7c, Annex B)"
                if role != RETAIN_ONLY
                else "audit state retain_only (C-H7b)"
            )
            return make()

        try:
            out[role] = builder.state(recipe, role, f"{name}-{role}", logged)
        except (KeyboardInterrupt, MemoryError):
            raise
        except Exception as exc:  # a control state that cannot be built is a reading's reason, not a crash
            why = f"the {role.replace('_', ' ')} state could not be built: {type(exc).__name__}: {exc}"
            out[role] = why
            log(why)
    return out


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def _capped(items: list[Any], spec: AuditTable) -> list[Any]:
    return items[: spec.max_items] if spec.max_items is not None else items


def _uds_data(
    cfg: AssessmentConfig, inputs: Inputs, spec: AuditTable, tok: PreTrainedTokenizerBase, audit: Any
) -> tuple[dict[str, object], dict[str, object]]:
    from remnant.latent.inputs import examples_from_items

    items = [inputs.pack.item(p.item_id) for p in inputs.probes]
    examples = _capped(examples_from_items(items), spec)
    if not examples:
        raise ConfigError(
            "audits: no P item has an accepted answer in its text to serve as a UDS entity",
            requirement="C-H7",
        )
    return {"examples": examples}, {"examples": [e.idx for e in examples]}


def _answer_probes(tok: PreTrainedTokenizerBase, items: list[Any], fmt: PromptFormat) -> list[Any]:
    from dataclasses import replace

    from remnant.latent.jaccess import make_probe
    from remnant.models.prompts import render_prompt_ids

    return [
        replace(
            make_probe(tok, it.id, render_prompt_ids(tok, it.question, fmt), [it.accepted[0]]),
            entity=it.entity_id,
        )
        for it in items
        if it.accepted
    ]


def _jaccess_data(
    cfg: AssessmentConfig, inputs: Inputs, spec: AuditTable, tok: PreTrainedTokenizerBase, audit: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    from remnant.latent.lens_text import LENS_TEXT
    from remnant.models.prompts import render_prompt_ids

    pack, fmt = inputs.pack, inputs.fmt
    calibrated = getattr(audit, "band_rule", "fixed") == "calibrated"  # the band is chosen on other entities
    calibration: list[Any] = []
    if spec.probes == "identity":
        from remnant.latent.jaccess_probes import build_identity_probes, identity_probes

        probes = identity_probes(tok, build_identity_probes(pack).probes, pack, fmt)
        if calibrated:
            held_out = build_identity_probes(pack, roles=("forget_relearn",)).probes
            calibration = identity_probes(tok, held_out, pack, fmt)
    else:
        attributes = cfg.probe.attributes
        relearn = [it for it in pack.split("relearn") if attributes is None or it.attribute in attributes]
        probes = _answer_probes(tok, [pack.item(p.item_id) for p in inputs.probes], fmt)
        calibration = _answer_probes(tok, relearn, fmt) if calibrated else []
    probes, calibration = _capped(probes, spec), _capped(calibration, spec)
    lens = [list(tok(text)["input_ids"]) for text in LENS_TEXT[: spec.lens_prompts]]
    data: dict[str, Any] = {"probes": probes, "calibration": calibration, "lens_prompts": lens}
    if spec.params.get("generic_max") is not None:
        # the question shape the probes have: answer probes ask the probed attributes, so the decoys ask those too
        asked = cfg.probe.attributes if spec.probes != "identity" else None
        decoy_items = [
            it
            for it in pack.split("retain") + pack.split("controls")
            if asked is None or it.attribute in asked
        ]
        data["decoys"] = [render_prompt_ids(tok, it.question, fmt) for it in _capped(decoy_items, spec)]
    key = {
        "probes": spec.probes,
        "probe_ids": [p.idx for p in probes],
        "calibration": [p.idx for p in calibration],
        "lens_prompts": _digest(lens),
        "decoys": _digest(data.get("decoys", [])),
    }
    return data, key


def _direction_data(
    cfg: AssessmentConfig, inputs: Inputs, spec: AuditTable, tok: PreTrainedTokenizerBase, audit: Any
) -> tuple[dict[str, object], dict[str, object]]:
    from remnant.latent.inputs import probe_prompts

    pack = inputs.pack
    attributes = cfg.probe.attributes or sorted(
        {it.attribute for it in pack.split("install") if it.attribute}
    )
    prompts = _capped(list(probe_prompts(tok, pack, list(attributes), inputs.fmt)), spec)
    return {"prompts": prompts}, {"prompts": _digest(prompts), "n_prompts": len(prompts)}


def audit_plan(
    cfg: AssessmentConfig,
    inputs: Inputs,
    table: str,
    spec: AuditTable,
    anchors: Mapping[str, LoadedState],
    cache_dir: Path | None,
) -> AuditPlan:
    """The plan of ``[audits.<table>]``: component, anchors, inputs (module docstring). ``anchors`` holds
    ``full`` (θ), ``control`` and, when built, ``retain_only``. Inputs that cannot be built from this pack (no
    entity-span example, no identity probe) make a plan with ``error`` set: its readings say *failed*."""
    from remnant.latent.block import Anchors

    name = audit_name(table, spec)
    tok = anchors["control"].tokenizer
    audit = create_audit(table, spec, inputs.fmt)  # its component record: assess.schedule.audit_cells (R23)
    family = audit.family
    reference = CONTROL if family == "direction" else spec.reference
    labels = Anchors(
        full=PRE, retain=reference, note="" if family == "direction" else REFERENCE_NOTES[reference]
    )
    builders = {"uds": _uds_data, "jaccess": _jaccess_data, "direction": _direction_data}
    error: str | None = None
    try:
        data, key = builders[family](cfg, inputs, spec, tok, audit)
    except (KeyboardInterrupt, MemoryError):
        raise
    except Exception as exc:  # a crashing audit is a failed reading, not a crashed run (C-H7)
        error = (
            f"its inputs could not be built from pack {inputs.pack.manifest.id}: {type(exc).__name__}: {exc}"
        )
        data, key = {}, {"error": error}
    chosen = {"full": anchors["full"], "control": anchors["control"]}
    if reference in anchors:
        chosen["reference"] = anchors[reference]
    return AuditPlan(
        table=table,
        name=name,
        audit=audit,
        anchors=chosen,
        labels=labels,
        data=data,
        inputs={**inputs.key_inputs(), **key},
        roles={role: AUDITED_ROLES[role] for role in audited_states(spec)},
        tokenizer=tok,
        cache_dir=cache_dir,
        reference_role=reference,
        error=error,
    )


def audited_states(spec: AuditTable) -> tuple[str, ...]:
    """The states ``spec`` audits: the post-removal model, and both Annex B control states when asked (C-H7c)."""
    return (POST, PROCEDURE, CONTENT) if spec.controls else (POST,)


__all__ = [
    "AUDITED_ROLES",
    "CONTENT",
    "LATENT_CACHE",
    "PROCEDURE",
    "RETAIN_ONLY",
    "audit_class",
    "audit_plan",
    "audited_states",
    "build_audit_states",
    "check_audits",
    "create_audit",
    "needed_states",
]
