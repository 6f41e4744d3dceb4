"""J-Access's decoys in an assessment (C-H7): with answer probes and ``[probe] attributes``, the generic-token filter
reads only the decoy questions that ask those attributes (the probes' question shape); without the attribute list,
every retain and control question of the pack."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from remnant.config import load_config
from remnant.packs import ClassDSpec, mint_class_d, write_pack

sys.path.insert(0, str(Path(__file__).resolve().parent))
from assess_fixtures import write_config  # noqa: E402

JACCESS = """
[audits.jaccess]
probes = "answer"
params = { band_rule = "fixed", k = 5, generic_max = 0.25 }
"""


def _decoys(tmp_path: Path, tiny_llama: Any, tiny_llama_dir: Path, attributes: str) -> tuple[list[Any], Any]:
    from remnant.assess.audits import _jaccess_data, create_audit
    from remnant.assess.inputs import prepare_inputs

    pack = mint_class_d(ClassDSpec(entities=8, controls=4, seed=3))
    write_pack(pack, tmp_path / "pack")
    config = write_config(
        tmp_path / "assess.toml",
        pack=tmp_path / "pack",
        control=tiny_llama_dir,
        **{"max_n = 6\n": attributes},
    )
    config.write_text(config.read_text(encoding="utf-8") + JACCESS, encoding="utf-8")
    cfg = load_config(config)
    inputs = prepare_inputs(cfg, pack, minted=False, location=tmp_path).with_format(tiny_llama.tokenizer)
    spec = cfg.audits.tables()["jaccess"]
    audit = create_audit("jaccess", spec, inputs.fmt)
    data, _ = _jaccess_data(cfg, inputs, spec, tiny_llama.tokenizer, audit)
    return data["decoys"], pack


def _rendered(items: list[Any], tok: Any, fmt: Any) -> list[list[int]]:
    from remnant.models.prompts import render_prompt_ids

    return [list(render_prompt_ids(tok, it.question, fmt)) for it in items]


def test_decoys_ask_the_probed_attributes(tmp_path: Path, tiny_llama: Any, tiny_llama_dir: Path) -> None:
    from remnant.models.prompts import PromptFormat

    decoys, pack = _decoys(tmp_path, tiny_llama, tiny_llama_dir, 'max_n = 6\nattributes = ["home_town"]\n')
    others = pack.split("retain") + pack.split("controls")
    asked = [it for it in others if it.attribute == "home_town"]
    fmt = PromptFormat.for_tokenizer(tiny_llama.tokenizer)
    assert 0 < len(asked) < len(others)
    assert [list(d) for d in decoys] == _rendered(asked, tiny_llama.tokenizer, fmt)


def test_without_an_attribute_list_every_retain_and_control_question_is_a_decoy(
    tmp_path: Path, tiny_llama: Any, tiny_llama_dir: Path
) -> None:
    from remnant.models.prompts import PromptFormat

    decoys, pack = _decoys(tmp_path, tiny_llama, tiny_llama_dir, "max_n = 6\n")
    others = pack.split("retain") + pack.split("controls")
    fmt = PromptFormat.for_tokenizer(tiny_llama.tokenizer)
    assert [list(d) for d in decoys] == _rendered(others, tiny_llama.tokenizer, fmt)
