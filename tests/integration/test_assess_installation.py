"""R2 from a run's records to its facts (pure; no model): the pre-removal state's installation record becomes the
facts' ``installation``, a record that is missing or contradicts itself or the config is refused naming R2, a
claimant's pre-removal folder is fixed by documented provenance, and C-Q3 says the pre-removal model holds the
target only where its installation reached the target."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from remnant.assess import facts as F
from remnant.config import load_config
from remnant.errors import RecordError
from remnant.records import CellRecord
from remnant.standard.cq3 import explain
from remnant.standard.facts import VerdictFacts
from remnant.standard.verdict import decide

sys.path.insert(0, str(Path(__file__).resolve().parent))
from assess_fixtures import tiny_pack, write_config  # noqa: E402

INSTALL_BLOCK = (
    "[models.pre_removal.install]\nmax_epochs = 1\nlr = 1e-3\ntarget_kappa = 0.9\nbatch_size = 16\n"
)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("installation")
    tiny_pack(root / "pack")
    return root


@pytest.fixture(scope="module")
def cfg(root: Path) -> Any:
    return load_config(write_config(root / "c.toml", pack=root / "pack", control=root))


@pytest.fixture(scope="module")
def claimant_cfg(root: Path) -> Any:
    pack = root / "pack"
    replacements: dict[str, Any] = {
        INSTALL_BLOCK: f'[models.pre_removal]\nfolder = "{root}"\n',
        f'pack = "{pack}"\n': f'pack = "{pack}"\nprovenance = "Training log v3 lists the canary corpus."\n',
    }
    return load_config(write_config(root / "claimant.toml", pack=pack, control=root, **replacements))


def pre_state(**install: Any) -> dict[str, Any]:
    """The pre-removal state's entry in the run's ``states`` context, as install_state records it."""
    record = {"reached": False, "target": 0.9, "kappa": 0.0, "k": 0, "n": 120, "epochs": 1.0, "steps": 8}
    record.update(install)
    return {"role": "pre_removal", "record": {"recipe": {}, "install": record}}


def test_a_reached_installation_is_carried_into_the_facts(cfg: Any) -> None:
    fact = F.installation_fact(cfg, pre_state(reached=True, k=114, kappa=0.95))
    assert fact == {
        "fixed_by": "installation",
        "metric": "kappa",
        "k": 114,
        "n": 120,
        "measured": 0.95,
        "target": 0.9,
        "reached": True,
    }


def test_an_unreached_installation_blocks_removed_through_the_facts(cfg: Any) -> None:
    """Facts the config's battery would call removed (every attack at 0/n, both models, utility kept) are partial
    once the installation record says κ 3/120 against 0.9 (R2), and removed with the installation reached."""
    cells = [
        CellRecord(
            run_id="r",
            cell_key=f"{attack}/{state}",
            attack=attack,
            surface="inference_time",
            model_state=state,
            metric="kappa",
            k=0,
            n=300,
            checkpoint="final",
            params={},
            elapsed_s=0.0,
        )
        for attack in ("prefill", "many_shot", "repeated_sampling")
        for state in ("post_removal", "control")
    ]
    unreached = F.installation_fact(cfg, pre_state(k=3, kappa=3 / 120))
    reached = F.installation_fact(cfg, pre_state(reached=True, k=110, kappa=110 / 120))
    verdicts = {}
    for name, installation in (("unreached", unreached), ("reached", reached)):
        facts = F.build_facts(cfg, cells, installation=installation)
        facts["track"] = "Q"  # no relearning needed (C2); the tiny config's Class D bar set aside
        facts["class"] = "C"
        facts.pop("insignificance")
        facts["attacks"] = [a for a in facts["attacks"] if a["surface"] == "inference_time"]
        facts["utility"] = {"removal_stage": 0.95, "attack_stage": None}
        verdicts[name] = decide(VerdictFacts.model_validate(facts))
    assert verdicts["reached"].verdict == "removed"
    assert verdicts["unreached"].verdict == "partial" and "R2" in verdicts["unreached"].rule_ids


@pytest.mark.parametrize(
    ("entry", "fragment"),
    [
        ({"role": "pre_removal", "record": {}}, "carries no installation result"),
        (None, "carries no installation result"),
        (pre_state(k="0"), "install.k '0' and install.n 120 are not a count"),
        (pre_state(reached="no"), "install.reached 'no' is not true or false"),
        (pre_state(target=0.5), "is not the pre-registered target_kappa 0.9"),
        (pre_state(kappa=0.5), "install.kappa 0.5 is not k/n = 0/120"),
        (pre_state(reached=True, k=12, kappa=0.1), "reached is true but measured 0.1 (12/120) is below"),
        (pre_state(k=121, kappa=121 / 120), "are not a count 0 ≤ k ≤ n"),
    ],
)
def test_an_installation_record_that_cannot_be_stated_is_refused(
    cfg: Any, entry: dict[str, Any] | None, fragment: str
) -> None:
    """A missing record, or one that contradicts the config or itself, is a RecordError naming R2 (exit 2),
    never a statement over an installation it cannot state."""
    with pytest.raises(RecordError) as info:
        F.installation_fact(cfg, entry)
    assert info.value.requirement == "R2" and fragment in str(info.value), str(info.value)


def test_r2_is_not_met_over_an_unreached_installation(cfg: Any) -> None:
    """Tier evidence (§7.1): the run meets R2 by construction only when its installation reached the target."""
    base = {"utility": {"removal_stage": 0.95, "attack_stage": None}}
    reached = F.installation_fact(cfg, pre_state(reached=True, k=114, kappa=0.95))
    unreached = F.installation_fact(cfg, pre_state())
    assert "R2" in F.general_met(cfg, {**base, "installation": reached}, minted_canaries=True)
    assert "R2" not in F.general_met(cfg, {**base, "installation": unreached}, minted_canaries=True)
    assert "R2" in F.general_met(cfg, base, minted_canaries=True)


def test_a_claimant_pre_removal_folder_is_fixed_by_provenance(claimant_cfg: Any) -> None:
    fact = F.installation_fact(claimant_cfg, {"role": "pre_removal", "record": {"folder": "x"}})
    assert fact == {"fixed_by": "provenance", "provenance": "Training log v3 lists the canary corpus."}


def _cq3_cells(pre_after: int) -> list[CellRecord]:
    """prefill lowers the post-removal model from 6/10 to 2/10; the pre-removal model goes 8/10 → ``pre_after``."""
    counts = {("none", "post_removal"): 6, ("prefill", "post_removal"): 2, ("none", "pre_removal"): 8}
    counts[("prefill", "pre_removal")] = pre_after
    return [
        CellRecord(
            run_id="r",
            cell_key=f"{attack}/{state}",
            attack=attack,
            surface="baseline" if attack == "none" else "inference_time",
            model_state=state,
            metric="kappa",
            k=k,
            n=10,
            checkpoint="final",
            params={},
            elapsed_s=0.0,
        )
        for (attack, state), k in counts.items()
    ]


REACHED = {"fixed_by": "installation", "reached": True}
UNREACHED = {"fixed_by": "installation", "reached": False}
PROVENANCE = {"fixed_by": "provenance", "provenance": "log"}


@pytest.mark.parametrize(
    ("installation", "pre_after", "explanation", "says"),
    [
        (REACHED, 8, "specific_to_post_removal", "which still holds the target"),
        (UNREACHED, 8, "undetermined", "did not reach the installation target (R2)"),
        (None, 8, "specific_to_post_removal", "intact (+0.000) while"),
        (PROVENANCE, 8, "specific_to_post_removal", "by the claimant's documented provenance"),
        (REACHED, 4, "format_disruption", "which still holds the target"),
        (UNREACHED, 4, "format_disruption", "although that model did not reach the installation target"),
        (None, 4, "format_disruption", "(-0.400): it disrupts"),
    ],
)
def test_cq3_says_the_pre_removal_model_holds_the_target_only_when_installed(
    cfg: Any, installation: dict[str, Any] | None, pre_after: int, explanation: str, says: str
) -> None:
    (check,) = F.format_checks(cfg, _cq3_cells(pre_after), installation)
    assert check["explanation"] == explanation
    assert says in check["reason"], check["reason"]
    assert ("still holds the target" in check["reason"]) == (installation is REACHED)


def test_cq3_rule_is_shared() -> None:
    """The harness and the records read C-Q3 from one rule: no drop, no pre-removal run, and the R2 branches."""
    assert explain(0.0, None)[0] == "not_reduced"
    assert explain(-0.1, None)[0] == "undetermined"
    assert explain(-0.1, 0.0, "unreached")[0] == "undetermined"
    assert explain(-0.1, 0.0, "reached")[0] == "specific_to_post_removal"
