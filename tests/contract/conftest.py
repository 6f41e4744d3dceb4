"""The contract's world: the tiny Llama (tests/fixtures_models.py) as a post-removal state, and the tiny Class D
pack of the assessment tests (tests/integration/assess_fixtures.py ``tiny_pack``), built once per session."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from assess_fixtures import tiny_pack  # noqa: E402
from contract_cases import POST, FirstRuns, State, World, contract_rows  # noqa: E402

#: How many probes and retain demonstrations the smoke measurements use (seconds on the tiny model).
PROBES, RETAIN = 3, 4


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    """Tiny models run fastest on one intra-op thread; under CPU contention more threads cost 10x (measured: the
    battery's relearning cell 16 s → 1.1 s on a loaded 2-core machine). Restored after each test."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@pytest.fixture(scope="session")
def world(tiny_llama: Any, tmp_path_factory: pytest.TempPathFactory) -> World:
    import copy

    import torch

    from remnant.classd import BatterySpec, class_d_canaries
    from remnant.models.prompts import PromptFormat
    from remnant.packs import load_pack
    from remnant.score.normalise import NORMALISATION_VERSION
    from remnant.score.probe import probes_from_pack
    from remnant.score.scorer import SCORER_VERSION
    from remnant.train.data import split_qa

    installed = copy.deepcopy(tiny_llama.model)
    with torch.no_grad():
        for p in installed.parameters():
            p.add_(0.02 * torch.sign(p))
    pack = load_pack(tiny_pack(tmp_path_factory.mktemp("contract_pack")))
    facts = {it.id for it in pack.split("probe") if it.kind == "fact"}
    fmt = PromptFormat.for_tokenizer(tiny_llama.tokenizer)
    state = State(POST, tiny_llama.model, tiny_llama.tokenizer, tiny_llama.identity.digest)
    return World(
        state=state,
        pack=pack,
        fmt=fmt,
        probes=tuple(p for p in probes_from_pack(pack, "probe") if p.item_id in facts)[:PROBES],
        retain=tuple(probes_from_pack(pack, "retain"))[:RETAIN],
        relearn=split_qa(pack, "relearn"),
        canaries={str(risk): c for risk, c in class_d_canaries(pack, BatterySpec()).items()},
        rows=contract_rows(),
        shared={
            "pack": pack.digest,
            "fmt": [fmt.style, fmt.system_prompt],
            "scorer": SCORER_VERSION,
            "normalisation": NORMALISATION_VERSION,
        },
        installed=installed,
    )


@pytest.fixture(scope="session")
def first_runs() -> FirstRuns:
    return FirstRuns()
