"""The papers' presets: the UDS paper's pool (``examples/sweep-uds-paper.toml``) is the paper's grid, and
``sweep plan`` prices it from the base model's config.json before the weights are downloaded (R23); a run needs
the weights (R2). ``examples/sweep-tofu-existing.toml`` reads a pool of published checkpoints."""

from __future__ import annotations

import json
import math
import sys
from collections import Counter
from pathlib import Path

import pytest

from remnant.cli import main
from remnant.errors import RemnantError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "formats"))
from formats_data import tofu_rows, write_tofu  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"

#: Llama-3.2-1B-Instruct's config.json (meta-llama's, the fields a causal LM is built from): 1,235,814,400
#: parameters with tied embeddings.
LLAMA_1B = {
    "architectures": ["LlamaForCausalLM"],
    "bos_token_id": 128000,
    "eos_token_id": [128001, 128008, 128009],
    "head_dim": 64,
    "hidden_act": "silu",
    "hidden_size": 2048,
    "intermediate_size": 8192,
    "max_position_embeddings": 131072,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 16,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {
        "factor": 32.0,
        "high_freq_factor": 4.0,
        "low_freq_factor": 1.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
    "rope_theta": 500000.0,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
    "vocab_size": 128256,
}


def test_the_uds_paper_preset_is_the_papers_grid() -> None:
    from remnant.sweep.checks import method_points
    from remnant.sweep.spec import GeneratedSpec, load_spec

    spec = load_spec(EXAMPLES / "sweep-uds-paper.toml")
    assert isinstance(spec, GeneratedSpec) and spec.base.dtype == "bf16"
    points = Counter({m.name: len(method_points(m)) for m in spec.removal.methods})
    # the reference repository's 150: 18 points for each of seven methods, 24 for SimNPO
    assert points == Counter(
        {
            "grad_diff": 18,
            "idk_nll": 18,
            "npo": 18,
            "idk_dpo": 18,
            "altpo": 18,
            "rmu": 18,
            "undial": 18,
            "simnpo": 24,
        }
    )
    assert len(spec.target.strengths) * len(spec.target.seeds) == 30
    assert len(spec.never_saw.variants) * len(spec.never_saw.seeds) == 30
    relearn = spec.perturbations.relearn  # E.1: one epoch, lr 2e-5, effective batch 32
    assert (relearn.lr, relearn.epochs, relearn.batch_size * relearn.grad_accum) == (2e-5, 1, 32)
    assert spec.suite.audits == ["uds"] and spec.perturbations.nf4


def test_the_published_pool_preset_reads(tmp_path: Path) -> None:
    from remnant.sweep.spec import ExistingSpec, load_spec

    spec = load_spec(EXAMPLES / "sweep-tofu-existing.toml")
    assert isinstance(spec, ExistingSpec) and spec.references == {"full": "full", "retain": "retain90"}
    methods = {m.method for m in spec.models if m.pool == "unlearned"}
    assert methods == {"grad_diff", "idk_nll", "npo", "idk_dpo", "altpo", "rmu", "undial", "simnpo"}


def _stage(tmp_path: Path) -> Path:
    """The UDS preset beside a base folder holding only config.json and a small TOFU pack."""
    from remnant.formats import tofu_to_pack
    from remnant.packs import write_pack

    base = tmp_path / "models" / "Llama-3.2-1B-Instruct"
    base.mkdir(parents=True)
    (base / "config.json").write_text(json.dumps(LLAMA_1B))
    tofu = write_tofu(tmp_path / "tofu", "jsonl", tofu_rows(forget=4, retain=12, holdout=4))
    write_pack(tofu_to_pack(tofu), tmp_path / "tofu-forget10")
    text = (EXAMPLES / "sweep-uds-paper.toml").read_text(encoding="utf-8")
    spec = tmp_path / "sweep-uds-paper.toml"
    spec.write_text(text.replace("[resources]", f'[resources]\nstore = "{tmp_path / "store"}"'))
    return spec


def test_plan_prices_the_paper_pool_from_config_json_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from remnant.models.arch import config_shapes

    spec = _stage(tmp_path)
    shapes = config_shapes(tmp_path / "models" / "Llama-3.2-1B-Instruct")
    assert sum(math.prod(s) for s in shapes.values()) == 1_235_814_400
    assert main(["sweep", "plan", str(spec)]) == 0
    text = capsys.readouterr().out
    assert "no weights yet, priced from its config.json" in text
    assert "211 models (base 1, never_saw 30, target 30, unlearned 150)" in text
    disk = next(line for line in text.splitlines() if line.startswith("disk: "))
    gb = float(disk.split()[1])
    # 60 full bf16 deltas of 1.236e9 parameters (2.47 GB each) and 150 rank-16 adapters, under the stated budget
    assert 60 * 2.47 < gb < 200.0, disk
    assert "GPU-hours" in text
    assert not (tmp_path / "store").exists()  # a plan writes nothing


def test_a_run_needs_the_base_weights(tmp_path: Path) -> None:
    spec = _stage(tmp_path)
    with pytest.raises(RemnantError) as info:
        from remnant.sweep.prepare import prepare

        prepare(spec, out=tmp_path / "run")
    assert "model.safetensors" in str(info.value) and "(R2)" in str(info.value)
