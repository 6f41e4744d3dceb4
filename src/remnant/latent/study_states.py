"""The model states of one latent-probe study run (Annex B.2): never-modified, installed, content-shuffled
install, installed-then-removed, never-installed-but-removal-applied, plus the relearning criterion.

Every state starts from a deep copy of the never-modified control, so the control is never modified; the
installed model and the content twin depend only on (model, seed) and are shared by every method of that seed.
The recipes are the training package's (``remnant.train``: install, controls, removal, relearn); nothing here
trains by itself.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from remnant.latent.study import LatentProbeConfig


@dataclass(frozen=True)
class RunStates:
    """One (model, method, seed) run's states, probe prompts and measured κ."""

    method: str
    seed: int
    control: Any
    installed: Any
    removed: Any
    procedure: Any
    content: Any
    prompts: tuple[tuple[int, ...], ...]
    kappa_p: dict[str, float]
    kappa_retain: dict[str, float]
    removal_status: str
    recovery: float | None
    control_relearned_p: float
    records: dict[str, Any] = field(default_factory=dict)

    def gates(self, cfg: LatentProbeConfig) -> dict[str, bool]:
        """B.6's suppression and utility gates, declared in the config; a diverged run never qualifies."""
        installed_p, removed_p = self.kappa_p["installed"], self.kappa_p["removed"]
        inst_r, rem_r = self.kappa_retain["installed"], self.kappa_retain["removed"]
        return {
            "installed": installed_p > 0.0,
            "suppressed": removed_p <= cfg.suppression * installed_p,
            "utility_kept": rem_r >= cfg.utility_floor * inst_r,
            "not_diverged": self.removal_status != "diverged",
        }


def _rate(score: tuple[int, int]) -> float:
    k, n = score
    return k / n if n else 0.0


def probe_prompts(tokenizer: Any, pack: Any, attributes: list[str], fmt: Any) -> tuple[tuple[int, ...], ...]:
    """Forget-domain probe inputs (B.3 step 1): held-out phrasings about the probe entities and the install
    phrasings of every forget entity (the removal split), identical for every state."""
    from remnant.models.prompts import render_prompt_ids

    items = [it for it in pack.split("probe") if it.kind == "fact" and it.attribute in attributes]
    items += [it for it in pack.split("removal") if it.attribute in attributes]
    questions = list(dict.fromkeys(it.question for it in items))
    return tuple(tuple(render_prompt_ids(tokenizer, q, fmt)) for q in questions)


def build_model_runs(
    model: str, cfg: LatentProbeConfig, *, log: Callable[[str], None] | None = None
) -> Iterator[RunStates]:
    """Load ``model`` once and yield one :class:`RunStates` per (seed, method), seeds outermost."""
    from remnant import registry
    from remnant.models import load_model
    from remnant.models.prompts import PromptFormat
    from remnant.packs import ClassDSpec, mint_class_d
    from remnant.train.controls import content_control, procedure_control
    from remnant.train.data import as_qa, removal_data, retain_training_qa, split_qa
    from remnant.train.install import InstallSpec, install
    from remnant.train.relearn import RelearnSpec, greedy_scorer, relearn_attack
    from remnant.train.removal import apply_removal

    say = log or (lambda _m: None)
    state = load_model(model, dtype=cfg.dtype)
    tok, control = state.tokenizer, state.model
    fmt = PromptFormat.for_tokenizer(tok, system_prompt=cfg.system_prompt)
    pack = mint_class_d(
        ClassDSpec(entities=cfg.pack.entities, controls=cfg.pack.controls, general=False, seed=cfg.pack.seed)
    )
    attrs = list(cfg.attributes)
    trainable = tuple(cfg.trainable) if cfg.trainable is not None else None
    probe_entities = {e.id for e in pack.manifest.entities if e.role == "forget_probe"}
    p_set = as_qa([it for it in pack.split("install") if it.entity_id in probe_entities], attrs)
    retain_set = retain_training_qa(pack, attrs)
    relearn_set = split_qa(pack, "relearn", attrs)
    score_p = greedy_scorer(tok, p_set, fmt)
    score_retain = greedy_scorer(tok, retain_set, fmt)
    prompts = probe_prompts(tok, pack, attrs, fmt)
    spec = InstallSpec(**cfg.install.model_dump(), trainable=trainable)
    control_p = _rate(score_p(control))
    for seed in cfg.seeds:
        say(f"{model} seed {seed}: install and content-shuffled twin")
        installed, inst = install(
            copy.deepcopy(control), tok, split_qa(pack, "install", attrs), spec, seed=seed, fmt=fmt
        )
        twin_state, twin = content_control(control, tok, pack, spec, seed=seed, attributes=attrs, fmt=fmt)
        content = twin_state.model
        installed_p, installed_r = _rate(score_p(installed)), _rate(score_retain(installed))
        for name in cfg.methods:
            say(f"{model} seed {seed}: {name} on the installed model and on the never-installed control")
            params = {**cfg.method_params.get(name, {})}
            if trainable is not None:
                params.setdefault("trainable", list(trainable))
            method = registry.create("method", name, params)
            data = removal_data(pack, attrs)
            removed, rem = apply_removal(
                method, copy.deepcopy(installed), tok, data, seed=seed, fmt=fmt, control=control
            )
            proc_state, _ = procedure_control(method, control, tok, data, seed=seed, fmt=fmt)
            procedure = proc_state.model
            removed_p = _rate(score_p(removed))
            relearn = relearn_attack(
                removed,
                control,
                tok,
                relearn_set,
                p_set,
                RelearnSpec(
                    budgets=tuple(b for b in cfg.relearn.budgets if b <= len(relearn_set))
                    or (len(relearn_set),),
                    lr=cfg.relearn.lr,
                    epochs=cfg.relearn.epochs,
                    checkpoint_epochs=tuple(cfg.relearn.checkpoint_epochs),
                    trainable=trainable,
                    seed=seed,
                ),
                fmt=fmt,
            )
            last = relearn.budgets[-1]
            best_removed = max(p.rate for p in last.post_removal.points)
            gap = installed_p - removed_p
            yield RunStates(
                method=name,
                seed=seed,
                control=control,
                installed=installed,
                removed=removed,
                procedure=procedure,
                content=content,
                prompts=prompts,
                kappa_p={
                    "control": control_p,
                    "installed": installed_p,
                    "removed": removed_p,
                    "procedure_control": _rate(score_p(procedure)),
                    "content_control": _rate(score_p(content)),
                },
                kappa_retain={"installed": installed_r, "removed": _rate(score_retain(removed))},
                removal_status=rem.status,
                recovery=(best_removed - removed_p) / gap if gap > 0 else None,
                control_relearned_p=max(p.rate for p in last.control.points),
                records={"install": inst.to_dict(), "twin": twin.to_dict(), "removal": rem.to_dict()},
            )


__all__ = ["RunStates", "build_model_runs", "probe_prompts"]
