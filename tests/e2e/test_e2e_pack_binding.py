"""Bound to SmolLM2-135M-Instruct, the never-modified control answers < 5% of canary probes (R5, R10).

The control is read in fp32: what this checks (the model does not know the minted facts, and knows a share of the
general questions) does not depend on the dtype, and on a CPU without bf16 matrix units a bf16 forward is about 7x
slower (SmolLM2, 32 x 48 tokens: 3.0 s fp32, 21.7 s bf16 on the 2-core CI-class machine), which made this the
slowest test of ``make test``. Loading in bf16 is checked on the tiny models (tests/unit/models/test_models_load.py)
and, on a GPU, by benchmarks/gpu_check.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fixtures_models import smollm2_dir  # noqa: F401
from remnant.packs import ClassDSpec, mint_class_d, write_pack
from remnant.packs.bind import bind_pack


@pytest.mark.slow
@pytest.mark.xdist_group("smollm2")
def test_smollm2_control_rarely_answers_canaries(tmp_path: Path, smollm2_dir: Path) -> None:  # noqa: F811
    from remnant.models import load_model

    state = load_model(smollm2_dir, dtype="fp32")
    pack = mint_class_d(ClassDSpec(entities=20, controls=10, seed=11))
    write_pack(pack, tmp_path)
    report = bind_pack(pack, state, max_new_tokens=12, batch=32, out_dir=tmp_path)
    print(
        json.dumps(
            {
                k: v
                for k, v in report.to_json().items()
                if k not in ("canary_correct_ids", "general_utility_set")
            }
        )
    )
    print(
        f"canary rate {report.canary_rate:.3f}; general kept {len(report.general_kept)}/{report.general_asked}"
    )
    assert report.canary_probes >= 100
    assert report.canary_rate < 0.05, report.canary_correct_ids
    assert report.r5_warning is None
    # R10: the control knows a good share of the general questions (capitals, arithmetic), and only those are kept
    assert 0.2 * report.general_asked < len(report.general_kept) <= report.general_asked
