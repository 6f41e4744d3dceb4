"""Does a pack hold what a config will ask of it? Checked when the config is pre-registered (R10, R14, R16).

:func:`remnant.packs.splits.check_splits` says what every pack of a class holds. Some splits only some
assessments need: a utility metric measures ``retain`` or ``general`` (R9, R10), a W-track relearning attack
trains on ``relearn`` (C-W1, C-W6), and P is whichever splits ``probe.splits`` names. A split the config needs
that holds nothing would otherwise surface mid-run, after installation and removal, as an error about empty
data; :func:`check_pack_fits` refuses it before anything is frozen, naming the config field, the split, the
pack file and the requirement.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from remnant.errors import ConfigError

if TYPE_CHECKING:
    from remnant.config import AssessmentConfig
    from remnant.packs.schema import Item, Pack

#: Utility metric -> the pack split it is measured on (remnant.assess.inputs.utility_components).
UTILITY_SPLITS: dict[str, str] = {
    "retain_kappa": "retain",
    "general_qa_kappa": "general",
    "perplexity": "general",
}


def _scored(cfg: AssessmentConfig, item: Item) -> bool:
    """As remnant.assess.inputs selects P: Class D scores its fact items; ``probe.attributes`` filters."""
    fact = cfg.claim_class != "D" or item.kind == "fact"
    return fact and (cfg.probe.attributes is None or item.attribute in cfg.probe.attributes)


def check_pack_fits(cfg: AssessmentConfig, pack: Pack, folder: str | Path) -> None:
    """Raise ConfigError unless ``pack`` (loaded from ``folder``) holds every split ``cfg`` will use."""
    where = cfg.source or "config"
    manifest = Path(folder) / "pack.json"
    if pack.manifest.pack_class != cfg.claim_class:
        raise ConfigError(
            f"{where}: field 'target.pack': {manifest} is a class {pack.manifest.pack_class} pack but the claim "
            f"is class {cfg.claim_class}",
            requirement="R2",
        )
    scored = 0
    for split in cfg.probe.splits:
        if split == "controls" and cfg.claim_class == "D":
            continue  # scored by the Class D battery (D4), not as P
        scored += sum(_scored(cfg, it) for it in pack.split(split))
    if not scored:
        raise ConfigError(
            f"{where}: field 'probe.splits': splits {cfg.probe.splits} of {manifest} hold no scorable item",
            requirement="R16",
        )
    for metric in cfg.utility.metrics:
        if metric not in UTILITY_SPLITS:
            continue
        split = UTILITY_SPLITS[metric]
        items = pack.split(split)
        if split == "retain":
            items = [it for it in items if _scored(cfg, it)]
        if not items:
            raise ConfigError(
                f"{where}: field 'utility.metrics': utility {metric} is measured on split {split!r}, which is "
                f"empty in {manifest}; u must be measurable on the control and the pre-removal model",
                requirement="R10",
            )
        kept = cfg.utility.params.get(metric, {}).get("kept_ids") or ()
        ids = {it.id for it in items}
        unknown = (
            [str(i) for i in kept if not isinstance(i, str) or i not in ids] if isinstance(kept, list) else []
        )
        if unknown:
            raise ConfigError(
                f"{where}: field 'utility.params.{metric}.kept_ids': {unknown[0]!r} is not an item of split "
                f"{split!r} in {manifest}",
                requirement="R10",
            )
    relearning = cfg.attacks.relearning
    if relearning is not None and relearning.enabled:
        attributes = cfg.probe.attributes  # as split_qa selects the relearning set
        if not [it for it in pack.split("relearn") if attributes is None or it.attribute in attributes]:
            raise ConfigError(
                f"{where}: field 'attacks.relearning': split 'relearn' of {manifest} holds no item to relearn on",
                requirement="C-W6",
            )


__all__ = ["UTILITY_SPLITS", "check_pack_fits"]
