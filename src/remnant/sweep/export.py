"""``remnant sweep export DIR MODEL --out FOLDER``: one pool model as a standalone model folder.

A generated pool stores its checkpoints as deltas and LoRA adapters over the base model, which no other tool
reads. Export rebuilds the model's chain, checked against the weights digest the sweep's own records pin (the
store's meta.json is never the authority, R23), and writes a plain Hugging Face folder (safetensors weights, the
base model's tokenizer and chat template), whole or not at all, so the model can be evaluated by ``remnant
eval``, assessed, or read by another framework. Nothing is pickled.
"""

from __future__ import annotations

from pathlib import Path

from remnant.errors import ConfigError
from remnant.sweep.report import read_plan


def export_inputs(sweep_dir: Path) -> dict[str, str | Path | None]:
    """What an export reads, by what a refusal calls it: the sweep folder, its checkpoint store, the pool's base
    model and the folders of an existing pool. The output guard (remnant.cli_paths) refuses each as ``--out``,
    so an export never replaces what it reads."""
    plan = read_plan(sweep_dir)
    base = plan.get("base_path")
    found: dict[str, str | Path | None] = {
        "the sweep folder": sweep_dir,
        "the checkpoint store": str(plan["store"]),
        "the pool's base model folder": base if isinstance(base, str) else None,
    }
    pool = plan["pool"]
    models = pool.get("models") if isinstance(pool, dict) else None
    for model in models if isinstance(models, list) else []:
        if isinstance(model, dict) and isinstance(model.get("path"), str):
            found[f"pool model {model.get('id')}"] = model["path"]
    return found


def export_model(sweep_dir: Path, model_id: str, out: Path) -> Path:
    """Write pool model ``model_id`` of the sweep in ``sweep_dir`` to ``out`` (replaced whole); returns ``out``."""
    from remnant.atomic import replace_dir
    from remnant.cli_paths import mark_output
    from remnant.records import RECORDS_FILE
    from remnant.sweep.context import Workspace
    from remnant.sweep.pins import read_pins

    # only what the sweep's own records pin is exported, checked against the pin: never the store's word (R23)
    pins = read_pins(sweep_dir / RECORDS_FILE)
    ctx = Workspace.of_plan(read_plan(sweep_dir), sweep_dir, pins=pins).open()
    by_id = {m.id: m for m in ctx.pool.models}
    if model_id not in by_id:
        raise ConfigError(
            f"{sweep_dir / 'plan.json'}: no model {model_id!r} in the pool (models: {', '.join(sorted(by_id))})",
            requirement="R23",
        )
    model = ctx.load_model(by_id[model_id])
    tokenizer = ctx.tokenizer()

    def build(tmp: Path) -> None:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        mark_output(tmp, "model")  # so a later export may replace this folder, and nothing else (R23)

    replace_dir(out, build)
    return out


__all__ = ["export_model"]
