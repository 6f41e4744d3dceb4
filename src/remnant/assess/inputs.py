"""What an assessment runs on, fixed before the first cell: pack, probe sets, training sets, components, seeds.

Everything here is derived from the config and the pack alone, so it is identical for the post-removal model and
the control (R3) and the same on resume. :class:`Inputs` is frozen: :func:`prepare_inputs` makes it before any
model loads, and :meth:`Inputs.with_format` returns the one copy that adds the control tokenizer's prompt format,
once the control is loaded and before anything trains or any cell runs. What the run learns as it goes (the
general questions the control answers, the removal method's parameters after training, the components each
stage creates) is not written back here: the stage that learns it returns it. Components (attacks, utility metrics, the removal method, the relearning
procedure) are created through the registry up front, so a misspelt name, a parameter of the wrong type or a
value the component refuses is bad input (exit 2) before any model trains, and every one is recorded with its
exact parameters (R23, R24). :func:`check_components` runs that creation alone, with no pack and no model:
``remnant preregister`` calls it before freezing, so nothing unrunnable is ever pre-registered (R14).

Orchestration keys in an attack's ``params`` (frozen with the rest by pre-registration, R14) that are not passed
to the attack itself:

- ``implementation``: the registered attack that fills this slot, e.g. ``repeated_sampling`` run by
  ``repeated_sampling_analytic`` (exact pass@N, no sampling noise); the slot name is what C-Q1 checks;
- ``max_new_tokens`` and ``batch_size``: generation settings of the attack's context.

``attacks.relearning.params`` takes the trainer's further parameters (:data:`RELEARN_TRAINER_KEYS`), and
``max_new_tokens``, the generation length of every unattacked score (baselines and relearning checkpoints).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from remnant.assess.runfiles import PACK_DIR
from remnant.config import AssessmentConfig, Relearning, derive_seed
from remnant.errors import ConfigError
from remnant.packs.schema import Pack

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from remnant.attacks.base import Attack, AttackContext
    from remnant.score.probe import Probe
    from remnant.states.builder import LoadedState
    from remnant.train.methods.base import QA, RemovalData
    from remnant.train.relearn import RelearnSpec

#: Generation length of unattacked scoring (baselines, relearning checkpoints) unless the config sets one.
SCORING_TOKENS = 24
RELEARN_TRAINER_KEYS = (
    "grad_accum",
    "weight_decay",
    "warmup_epochs",
    "schedule",
    "max_grad_norm",
    "bf16",
    "lora_rank",
    "lora_alpha",
    "trainable",
    "max_new_tokens",
)


def load_or_mint_pack(cfg: AssessmentConfig, run: Path) -> tuple[Pack, bool, Path]:
    """The config's pack folder (verified), or the pack minted for this run into ``RUN/pack`` (R2, R18)."""
    from remnant.packs.schema import load_pack, write_pack

    if cfg.target.pack is not None:
        folder = cfg.resolve(cfg.target.pack)
        return load_pack(folder), False, folder.resolve()
    folder = run / PACK_DIR
    if (folder / "pack.json").is_file():
        return load_pack(folder), True, folder.resolve()
    pack = mint_pack(cfg)
    write_pack(pack, folder)
    return pack, True, folder.resolve()


def mint_pack(cfg: AssessmentConfig) -> Pack:
    """The pack the config's ``target.mint`` declares (R2, R18): Class D canaries or Class C items."""
    mint = cfg.target.mint
    assert mint is not None
    if mint.pack_class == "D":
        from remnant.packs.classd import ClassDSpec, mint_class_d

        spec = ClassDSpec(
            entities=mint.entities, controls=mint.controls, seed=cfg.mint_seed(), repetitions=mint.repetitions
        )
        return mint_class_d(spec)
    from remnant.packs.classc import mint_class_c

    return mint_class_c(substances=mint.entities, seed=cfg.mint_seed(), repetitions=mint.repetitions)


def _probe_items(cfg: AssessmentConfig, pack: Pack, split: str) -> list[Probe]:
    """Scored items of one split: Class D scores its singling-out facts here; linkage and inference items
    belong to the Class D battery (remnant.classd, D-3, D-4). Capped at ``probe.max_n`` in pack order (R14)."""
    from remnant.score.probe import probes_from_pack

    probes = probes_from_pack(pack, split)
    if cfg.claim_class == "D":
        kinds = {it.id: it.kind for it in pack.split(split)}
        probes = [p for p in probes if kinds[p.item_id] == "fact"]
    attributes = cfg.probe.attributes
    if attributes is not None:
        probes = [p for p in probes if p.attribute in attributes]
    cap = cfg.probe.max_n
    return probes[:cap] if cap is not None else probes


def component_record(role: str, spec: Mapping[str, object]) -> dict[str, object]:
    """One entry of the ``components`` context: the component's role in the run and its registered name,
    version and exact parameters (R23, R24)."""
    return {"role": role, **spec}


#: An attack slot: (slot name, instance or None, not-applicable reason, surface) (C-Q1, C-Q2).
AttackSlot = tuple[str, "Attack | None", str | None, str]


@dataclass(frozen=True)
class Inputs:
    """The inputs every cell shares (see module docstring); ``fmt`` is None until :meth:`with_format`."""

    cfg: AssessmentConfig
    pack: Pack
    minted: bool
    location: Path
    probes: tuple[Probe, ...]
    retain: tuple[Probe, ...]
    general: tuple[Probe, ...]
    install_items: tuple[QA, ...]
    removal_data: RemovalData
    relearn_set: tuple[QA, ...]
    scored_set: tuple[QA, ...]
    attacks: tuple[AttackSlot, ...]
    attack_tokens: Mapping[str, int]
    attack_batch: Mapping[str, int]
    scoring_tokens: int
    notes: tuple[str, ...] = ()
    fmt: Any = None  # PromptFormat once with_format has run; Any so callers need not re-check it

    @property
    def probe_ids(self) -> list[str]:
        return [p.item_id for p in self.probes]

    def with_format(self, tokenizer: PreTrainedTokenizerBase) -> Inputs:
        """These inputs with the prompt format of the control's tokenizer, used identically on every state (R3)."""
        from remnant.models.prompts import PromptFormat

        return replace(
            self, fmt=PromptFormat.for_tokenizer(tokenizer, system_prompt=self.cfg.models.system_prompt)
        )

    def key_inputs(self) -> dict[str, object]:
        """What every cell key shares: pack, prompt format and scorer versions."""
        from remnant.score.normalise import NORMALISATION_VERSION
        from remnant.score.scorer import SCORER_VERSION

        return {
            "pack": self.pack.digest,
            "fmt": [self.fmt.style, self.fmt.system_prompt] if self.fmt is not None else None,
            "scorer": SCORER_VERSION,
            "normalisation": NORMALISATION_VERSION,
        }

    def context(
        self, state: LoadedState, *, seed: int, max_new_tokens: int, batch_size: int = 16
    ) -> AttackContext:
        from remnant.attacks.base import AttackContext

        return AttackContext(
            model=state.model,
            tokenizer=state.tokenizer,
            fmt=self.fmt,
            seed=seed,
            demonstrations=tuple(self.retain),
            max_new_tokens=max_new_tokens,
            batch_size=batch_size,
        )

    def needs_general_set(self) -> bool:
        names = self.cfg.utility.metrics
        return "general_qa_kappa" in names and "kept_ids" not in self.cfg.utility.params.get(
            "general_qa_kappa", {}
        )

    def pack_context(self) -> dict[str, object]:
        from remnant.run_manifest import pack_record

        record = pack_record(self.pack.manifest, location=self.location)
        return {
            "digest": self.pack.digest,
            "record": record.model_dump(mode="json", by_alias=True),
            "chance_rate": self.pack.manifest.chance_rate,
            "minted_canaries": self.pack.manifest.pack_class == "D"
            and self.pack.manifest.collision_filter is not None,
            "minted_by_run": self.minted,
            "publicly_released": False,
            "probe_n": len(self.probes),
            "notes": list(self.notes),
        }

    def seeds(self) -> dict[str, int]:
        master = self.cfg.seeds.master
        out = {"master": master}
        out.update({k: derive_seed(master, k) for k in ("install", "removal", "baseline", "relearning")})
        for name, _, _, _ in self.attacks:
            out[f"attack.{name}"] = derive_seed(master, "attack", name)
        if self.minted:
            out["mint"] = self.cfg.mint_seed()
        return out

    def hyperparameters(self) -> dict[str, dict[str, Any]]:
        cfg = self.cfg
        out: dict[str, dict[str, object]] = {
            "scoring": {
                "max_new_tokens": self.scoring_tokens,
                "prompt_style": getattr(self.fmt, "style", None),
            },
            "probe": {"splits": cfg.probe.splits, "max_n": cfg.probe.max_n, "n": len(self.probes)},
        }
        if cfg.models.pre_removal.install is not None:
            out["install"] = cfg.models.pre_removal.install.model_dump(mode="json")
        if cfg.models.post_removal.method is not None:
            out["removal"] = {"method": cfg.models.post_removal.method, **cfg.models.post_removal.params}
        if cfg.attacks.relearning is not None:
            out["relearning"] = cfg.attacks.relearning.model_dump(mode="json")
        for name, attack in cfg.attacks.named().items():
            out[f"attack.{name}"] = {"enabled": attack.enabled, **attack.params}
        return out

    def attack_components(self) -> list[dict[str, object]]:
        """The component records of the enabled, applicable attacks, in the config's order (R23)."""
        return [
            component_record(f"attack:{name}", attack.spec.to_dict())
            for name, attack, _, _ in self.attacks
            if attack is not None and attack.spec is not None
        ]

    def precision(self) -> list[dict[str, object]]:
        """Precision reductions (R25): a GGUF-origin zoo model, and a reduced compute dtype."""
        from remnant.run_manifest import PrecisionReduction, gguf_origin

        out: list[dict[str, object]] = []
        zoo_name = self.cfg.models.control.zoo
        if zoo_name is not None:
            from remnant.models import zoo

            entry = zoo.ZOO.get(zoo_name)
            if entry is not None:
                quant = entry.gguf_name.rsplit(".", 2)[-2] if entry.gguf_name.count(".") >= 2 else "gguf"
                out.append(gguf_origin(entry.gguf_name, quant).model_dump(mode="json"))
        if self.cfg.models.dtype != "float32":
            out.append(
                PrecisionReduction(
                    stage="scoring",
                    description=f"every state evaluated in {self.cfg.models.dtype}",
                    dtype=self.cfg.models.dtype,
                    reference="float32",
                    rate_margin=0.0,
                    utility_margin=0.0,
                    basis="declared, not measured: shared by every state",
                ).model_dump(mode="json")
            )
        return out


def _attack_slot(name: str, params: dict[str, Any]) -> tuple[str, dict[str, Any], int | None, int | None]:
    """An attack table's params split into (implementation, the attack's own params, max_new_tokens,
    batch_size): the orchestration keys of the module docstring are not passed to the attack."""
    own = dict(params)
    implementation = str(own.pop("implementation", name))
    tokens = own.pop("max_new_tokens", None)
    batch = own.pop("batch_size", None)
    return implementation, own, tokens, batch


def _attack_class(name: str, implementation: str) -> type[Attack]:
    from remnant import registry

    try:
        return registry.get("attack", implementation)
    except ConfigError as exc:
        raise ConfigError(f"field 'attacks.{name}': {exc}", requirement="R14") from None


def _create_attack(name: str, implementation: str, params: dict[str, object]) -> Attack:
    from remnant.assess.params import create

    attack = create("attack", implementation, params, field=f"attacks.{name}.params", requirement="R14")
    return cast("Attack", attack)  # the registry refuses an attack class outside Attack (K4)


def attack_components(
    cfg: AssessmentConfig, probes: Sequence[Probe]
) -> tuple[list[AttackSlot], dict[str, int], dict[str, int]]:
    """Every declared attack: (slot name, instance or None, not-applicable reason, surface) (C-Q1, C-Q2)."""
    from remnant.score.probe import target_format

    fmt_name = target_format(list(probes))
    out: list[AttackSlot] = []
    tokens: dict[str, int] = {}
    batch: dict[str, int] = {}
    for name, table in cfg.attacks.named().items():
        implementation, params, max_new_tokens, batch_size = _attack_slot(name, table.params)
        if max_new_tokens is not None:
            tokens[name] = int(max_new_tokens)
        if batch_size is not None:
            batch[name] = int(batch_size)
        surface = str(getattr(_attack_class(name, implementation), "surface", "inference_time"))
        if not table.enabled:
            out.append((name, None, table.reason or "disabled in the config", surface))
            continue
        attack = _create_attack(name, implementation, params)
        reason = attack.applicable(fmt_name, cfg.track)
        out.append((name, None if reason else attack, reason, surface))
    return out, tokens, batch


def _create_utility(name: str, params: dict[str, object]) -> Any:
    from remnant import registry
    from remnant.assess.params import create

    if name not in registry.names("utility"):  # unknown name: the metrics list is at fault (R9)
        create("utility", name, params, field="utility.metrics", requirement="R9")
    return create("utility", name, params, field=f"utility.params.{name}", requirement="R9")


def check_utility_metrics(cfg: AssessmentConfig) -> None:
    """Create each declared utility metric once with its declared parameters, before any model work (R9).

    The components the run uses are made later by :func:`utility_components`, which adds data-dependent
    parameters; a name or parameter the registry refuses is refused here, naming the field."""
    for name in cfg.utility.metrics:
        _create_utility(name, dict(cfg.utility.params.get(name, {})))


def check_components(cfg: AssessmentConfig) -> None:
    """Create every component the config declares, as a run would, without a pack or a model (R14, R23).

    Enabled attacks, utility metrics, the removal method (and the training loop settings it makes) and the
    relearning procedure: a name, a parameter name, a type or a value any of them refuses is a ConfigError
    naming the config file, the field and its requirement. ``remnant preregister`` calls this before freezing.
    """
    try:
        for name, table in cfg.attacks.named().items():
            implementation, params, _, _ = _attack_slot(name, table.params)
            _attack_class(name, implementation)
            if table.enabled:
                _create_attack(name, implementation, params)
        check_utility_metrics(cfg)
        check_removal_method(cfg)
        rel = cfg.attacks.relearning
        if rel is not None and rel.enabled:
            relearn_spec(cfg, rel)
        from remnant.assess.audits import check_audits

        check_audits(cfg)  # white-box audits (C-H7): not frozen, but never left to fail after the training
    except ConfigError as exc:
        if cfg.source is None:
            raise
        raise ConfigError(f"{cfg.source}: {exc}", requirement=exc.requirement) from None


def check_removal_method(cfg: AssessmentConfig) -> None:
    """Create the declared removal method and the training settings it makes (R1c, R23); no model needed."""
    from remnant import registry
    from remnant.assess.params import create

    post = cfg.models.post_removal
    if post.method is None:
        return
    if post.method not in registry.names("method"):
        create("method", post.method, {}, field="models.post_removal.method", requirement="R1c")
    method = create("method", post.method, post.params, field="models.post_removal.params", requirement="R23")
    try:
        method.train_config(seed=0, progress=False)
    except (ConfigError, ValueError) as exc:
        raise ConfigError(f"field 'models.post_removal.params': {exc}", requirement="R23") from None


def utility_components(
    cfg: AssessmentConfig, inputs: Inputs, general_kept: Sequence[str] | None = None
) -> list[tuple[str, Any, list[Any]]]:
    """Each declared utility metric with the data it measures (R9, R10). ``general_kept``: the general questions
    the never-modified control answers, which ``general_qa_kappa`` is measured on unless the config pins them."""
    out: list[tuple[str, Any, list[Any]]] = []
    for name in cfg.utility.metrics:
        params = dict(cfg.utility.params.get(name, {}))
        if name == "general_qa_kappa" and "kept_ids" not in params and general_kept is not None:
            params["kept_ids"] = tuple(general_kept)
        metric = _create_utility(name, params)
        if name == "retain_kappa":
            data: list[Any] = list(inputs.retain)
        elif name == "perplexity":
            data = [f"{p.question} {p.answer}" for p in inputs.general]
        else:
            data = list(inputs.general)
        out.append((name, metric, data))
    return out


def relearn_spec(cfg: AssessmentConfig, rel: Relearning) -> RelearnSpec:
    """The declared relearning procedure as the trainer's RelearnSpec (C-W1, C-W3, C-W5).

    ``attacks.relearning.params`` is checked like a component's: names against :data:`RELEARN_TRAINER_KEYS`,
    values against the RelearnSpec field each sets."""
    import typing

    from remnant.assess.params import check_types
    from remnant.train.loop import LoraSpec
    from remnant.train.relearn import RelearnSpec

    params = dict(rel.params)
    unknown = sorted(set(params) - set(RELEARN_TRAINER_KEYS))
    if unknown:
        raise ConfigError(
            f"field 'attacks.relearning.params': unknown parameter(s) {unknown}; accepted: {', '.join(RELEARN_TRAINER_KEYS)}",
            requirement="C-W1",
        )
    try:
        check_types(typing.get_type_hints(RelearnSpec), params)
    except ConfigError as exc:
        raise ConfigError(f"field 'attacks.relearning.params': {exc}", requirement="C-W1") from None
    params.pop("max_new_tokens", None)
    lora = None
    rank = params.pop("lora_rank", None)
    alpha = params.pop("lora_alpha", None)
    if rank is not None:
        lora = LoraSpec(rank=int(rank), alpha=float(alpha) if alpha is not None else 2.0 * int(rank))
    trainable = params.pop("trainable", None)
    try:
        spec = RelearnSpec(
            budgets=tuple(rel.budgets),
            lr=rel.lr,
            epochs=rel.max_epochs,
            checkpoint_epochs=tuple(rel.first_epoch_checkpoints),
            batch_size=rel.batch_size,
            tau=cfg.tau,
            seed=derive_seed(cfg.seeds.master, "relearning"),
            lora=lora,
            trainable=tuple(trainable) if trainable is not None else None,
            **params,
        )
        spec.train_config(False, "check")  # the loop's own checks (schedule, sizes) before any training
    except (ConfigError, ValueError) as exc:
        raise ConfigError(f"field 'attacks.relearning.params': {exc}", requirement="C-W1") from None
    return spec


def prepare_inputs(cfg: AssessmentConfig, pack: Pack, *, minted: bool, location: Path) -> Inputs:
    """Probe sets, training sets and components from the config and the pack (no model needed)."""
    from remnant.score.probe import probes_from_pack
    from remnant.train.data import as_qa, removal_data, split_qa

    notes: list[str] = []
    probes: list[Probe] = []
    for split in cfg.probe.splits:
        if split == "controls" and cfg.claim_class == "D":
            notes.append(
                "probe split 'controls' (D4 control entities) is scored by the Class D battery, not as P"
            )
            continue
        probes += _probe_items(cfg, pack, split)
    if not probes:
        raise ConfigError(
            f"field 'probe.splits': no scorable items in {cfg.probe.splits} of pack {pack.manifest.id}",
            requirement="R16",
        )
    retain = _probe_items(cfg, pack, "retain") if "retain" in pack.manifest.splits else []
    general = probes_from_pack(pack, "general") if pack.manifest.splits.get("general") else []
    attacks, tokens, batch = attack_components(cfg, probes)
    check_removal_method(cfg)  # a bad method parameter must not cost the installation first (R1c, R23)
    rel = cfg.attacks.relearning
    if rel is not None and rel.enabled:
        relearn_spec(cfg, rel)  # validate early (exit 2 before training)
    # probe.attributes: P and R hold the same attributes, so relearning trains on what P scores (C-W6).
    relearn = split_qa(pack, "relearn", cfg.probe.attributes)
    scored = as_qa([pack.item(p.item_id) for p in probes])
    scored_questions = {q.question.strip().casefold() for q in scored}
    shared = [q.question for q in relearn if q.question.strip().casefold() in scored_questions]
    if shared:
        raise ConfigError(
            f"pack {pack.manifest.id}: relearning set repeats scored question {shared[0]!r}",
            requirement="C-W6",
        )
    scoring = rel.params.get("max_new_tokens", SCORING_TOKENS) if rel is not None else SCORING_TOKENS
    if len(probes) < cfg.min_n:
        notes.append(f"P holds {len(probes)} items, below the pre-registered min_n {cfg.min_n} (R21)")
    return Inputs(
        cfg=cfg,
        pack=pack,
        minted=minted,
        location=location,
        probes=tuple(probes),
        retain=tuple(retain),
        general=tuple(general),
        install_items=split_qa(pack, "install"),
        removal_data=removal_data(pack),
        relearn_set=relearn,
        scored_set=scored,
        attacks=tuple(attacks),
        attack_tokens=tokens,
        attack_batch=batch,
        scoring_tokens=int(scoring),
        notes=tuple(notes),
    )


__all__ = [
    "AttackSlot",
    "Inputs",
    "SCORING_TOKENS",
    "attack_components",
    "component_record",
    "load_or_mint_pack",
    "mint_pack",
    "prepare_inputs",
    "relearn_spec",
    "utility_components",
]
