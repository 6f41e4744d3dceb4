"""``remnant sweep export DIR MODEL --out FOLDER``: one pool model as a standalone model folder.

A generated pool stores its checkpoints as deltas and LoRA adapters over the base model (remnant.sweep.store),
which no other tool reads. Export rebuilds the model's chain (checked against the recorded weights digest, R23)
and writes a plain Hugging Face folder — ``config.json``, ``model.safetensors``, the base model's tokenizer and
chat template — so the model can be evaluated by ``remnant eval``, assessed, or read by another framework. The
folder is written whole or not at all (remnant.atomic.replace_dir). Safetensors only: nothing is pickled.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from remnant.errors import ConfigError
from remnant.jsonio import read_json


def _workspace(sweep_dir: Path) -> Any:
    from remnant.sweep.context import Workspace
    from remnant.sweep.prepare import PACK_DIR

    plan = read_json(sweep_dir / "plan.json")
    if not isinstance(plan, dict) or not {"spec", "pool", "store", "run_id"} <= set(plan):
        raise ConfigError(
            f"{sweep_dir / 'plan.json'}: not a sweep plan (spec, pool, store, run_id)", requirement="R23"
        )
    return Workspace(
        spec=plan["spec"],
        pool=plan["pool"],
        pack_dir=str(sweep_dir / PACK_DIR),
        store=str(plan["store"]),
        out=str(sweep_dir),
        run_id=str(plan["run_id"]),
        base_path=plan.get("base_path"),
    )


def export_model(sweep_dir: Path, model_id: str, out: Path) -> Path:
    """Write pool model ``model_id`` of the sweep in ``sweep_dir`` to ``out`` (replaced whole); returns ``out``."""
    from remnant.atomic import replace_dir

    ctx = _workspace(sweep_dir).open()
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

    replace_dir(out, build)
    return out


__all__ = ["export_model"]
