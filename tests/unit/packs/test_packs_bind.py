"""Binding a pack to the tiny random Llama: runs the real generate/score path and writes binding.json (R5, R10)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fixtures_models import tiny_llama, tiny_llama_dir  # noqa: F401
from remnant.packs import ClassDSpec, load_pack, mint_class_d, write_pack
from remnant.packs.bind import bind_pack
from remnant.score.normalise import answer_matches as matches
from remnant.score.normalise import normalise_answer


def test_normalised_match() -> None:
    assert normalise_answer("The  Paris!") == "paris"
    assert matches("It is Paris, of course.", ["Paris"])
    assert not matches("Parisian food", ["Paris"])
    assert matches("QX-4821.", ["QX-4821"]) and not matches("QX-48210", ["QX-4821"])


def test_bind_tiny_model_writes_binding(tmp_path: Path, tiny_llama: Any) -> None:  # noqa: F811
    pack = mint_class_d(ClassDSpec(entities=8, controls=2, seed=1))
    write_pack(pack, tmp_path)
    report = bind_pack(pack, tiny_llama, max_new_tokens=4, limit=12, out_dir=tmp_path)
    assert report.canary_probes + report.choice_probes + report.infer_probes == 12
    assert report.general_asked == len(pack.split("general"))
    data = json.loads((tmp_path / "binding.json").read_text())
    assert data["pack_digest"] == pack.digest and data["control_identity"].startswith(("sha256:", ""))
    assert set(data["general_utility_set"]) <= {it.id for it in pack.split("general")}
    assert load_pack(tmp_path).digest == pack.digest  # binding does not change the digest
