"""The demo's fixtures and configs: the pack it mints, the three configs it assesses, their plan.

Running ``remnant demo --quick`` itself takes longer than a test may on two cores (its timings and verdicts are
reported in benchmarks/RESULTS.md and the issue notes); these checks keep its inputs honest without a model:
the restricted pack still separates P from every training split (R16, C-W6), P is large enough for R21's Tier 2
count, the three configs pre-register and freeze to different digests, and the quick plan fits a CPU.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from remnant.assess.plan import CPU_THROUGHPUT, make_plan
from remnant.config import load_config
from remnant.demo import QUICK, REMOVALS, demo_config, demo_pack, restrict_attributes
from remnant.packs import check_splits, load_pack
from remnant.prereg import freeze


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo")
    demo_pack(out, QUICK)
    for name in REMOVALS:
        path = out / "configs" / f"{name}.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(demo_config(name, QUICK, quick=True), encoding="utf-8")
    return out


def test_quick_pack_keeps_its_splits_apart(demo_dir: Path) -> None:
    pack = load_pack(demo_dir / "pack")
    check_splits(pack)  # R16, C-W6
    facts = [it for it in pack.items if it.kind == "fact"]
    assert {it.attribute for it in facts} == set(QUICK.attributes)
    probe, relearn = pack.split("probe"), pack.split("relearn")
    assert len(probe) == 32 >= 30  # R21's Tier 2 count per cell
    assert len(relearn) == 48 >= max(QUICK.relearn_budgets)
    assert not {it.entity_id for it in probe} & {it.entity_id for it in relearn}  # item-disjoint (C-W6)
    assert len(pack.split("install")) == QUICK.entities * len(QUICK.attributes) * 3
    assert len(pack.split("retain")) == 16  # u: κ on the retained people's held-out phrasings (R9, R10)
    replayed = restrict_attributes(load_pack(demo_dir / "pack"), QUICK.attributes, replay_every=3)
    moved = [it for it in replayed.split("install") if it.kind == "general"]
    measured = {it.question for it in replayed.split("general")}
    assert len(moved) == 58 and len(measured) == 114 and not measured & {it.question for it in moved}


def test_three_configs_preregister_to_distinct_digests(demo_dir: Path) -> None:
    digests = set()
    for name in REMOVALS:
        cfg = load_config(demo_dir / "configs" / f"{name}.toml")
        assert cfg.models.post_removal.method == REMOVALS[name][0]
        assert cfg.models.system_prompt == ""
        digests.add(freeze(cfg, demo_dir / "runs" / name).digest)
    assert len(digests) == 3


def test_quick_plan_is_sized_for_a_cpu(demo_dir: Path) -> None:
    plan = make_plan(load_config(demo_dir / "configs" / "npo.toml"))
    assert (
        plan.probe_n == 32 and plan.tier_ceiling == "W2"
    )  # Class D bar 0.05 needs n >= 73 at zero recoveries
    assert plan.minutes(CPU_THROUGHPUT) < 20
