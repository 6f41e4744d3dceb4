"""remnant's published conformance test vectors (docs/vectors.md): every file through decide() and the CLI.

Each ``*.json`` in ``remnant/data/vectors/`` (package data, so ``remnant demo --vectors`` finds them in an installed
wheel too) holds ``description``, ``rules``, ``facts`` and ``expected``: the verdict, g* and its
two-sided 95% Wilson interval (computed for the vectors with statsmodels, not with remnant.stats), the decisive
attacks and the exact set of rule ids the reasons cite. A vector whose ``expected`` is ``{"error": {"field": F}}``
holds facts the engine must refuse, naming F.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from remnant.cli import main
from remnant.demo_vectors import PACKAGED_VECTORS
from remnant.standard.facts import VerdictFacts
from remnant.standard.verdict import decide

VECTORS = sorted(PACKAGED_VECTORS.glob("*.json"))
IDS = [p.stem for p in VECTORS]
VERDICTS = {"removed", "hidden", "utility-collapsed", "partial"}


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def test_vector_set_is_complete() -> None:
    """Annex D.1–D.4 plus at least twenty edge cases; every V1 verdict appears at least once."""
    stems = {p.stem.split("_")[0] for p in VECTORS}
    assert {"d1", "d2", "d3", "d4"} <= stems
    assert sum(1 for p in VECTORS if p.stem.startswith("e")) >= 20
    seen = {load(p)["expected"].get("verdict") for p in VECTORS}
    assert seen >= VERDICTS


@pytest.mark.parametrize("path", VECTORS, ids=IDS)
def test_vector_shape(path: Path) -> None:
    data = load(path)
    assert set(data) <= {"description", "rules", "facts", "expected", "annex_tier"}
    assert data["description"].strip() and data["rules"]
    rules = pytest.importorskip("remnant.standard.rules")
    known = {str(rule) for rule in rules.Rule}
    assert set(data["rules"]) <= known
    assert set(data["expected"].get("rule_ids", [])) <= known


@pytest.mark.parametrize("path", VECTORS, ids=IDS)
def test_vector_through_decide(path: Path) -> None:
    data = load(path)
    expected = data["expected"]
    if "error" in expected:
        with pytest.raises(ValidationError) as info:
            VerdictFacts.model_validate(data["facts"])
        fields = {".".join(str(p) for p in err["loc"]) for err in info.value.errors()}
        assert expected["error"]["field"] in fields
        return
    result = decide(VerdictFacts.model_validate(data["facts"]))
    assert result.verdict == expected["verdict"], result.reasons
    if expected["g_star"] is None:
        assert result.g_star is None and result.g_star_ci95 is None
    else:
        assert result.g_star == pytest.approx(expected["g_star"], abs=1e-12)
        assert result.g_star_ci95 == pytest.approx(tuple(expected["g_star_ci95"]), abs=1e-9)
    assert list(result.decisive_attacks) == expected["decisive_attacks"], result.reasons
    assert set(result.rule_ids) == set(expected["rule_ids"]), result.reasons
    assert result.rule_ids[0] == "V1"
    for fragment in expected.get("reasons_contain", []):
        assert any(fragment in reason for reason in result.reasons), (fragment, result.reasons)
    cited = set()
    for reason in result.reasons:
        match = re.search(r"\(([^()]+)\)\.$", reason)
        assert match, f"reason does not end by citing its rule ids: {reason!r}"
        cited.update(part.strip() for part in match.group(1).split(","))
    assert cited | {"V1"} == set(result.rule_ids)


@pytest.mark.parametrize("path", VECTORS, ids=IDS)
def test_vector_through_cli(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`remnant verdict VECTOR.json` reads the facts block of the vector and prints the expected verdict object."""
    expected = load(path)["expected"]
    code = main(["verdict", str(path)])
    out, err = capsys.readouterr()
    if "error" in expected:
        assert code == 2
        assert str(path) in err and expected["error"]["field"] in err
        return
    assert code == 0, err
    printed = json.loads(out)
    assert set(printed) == {"verdict", "reasons", "g_star", "g_star_ci95", "decisive_attacks", "rule_ids"}
    assert printed["verdict"] == expected["verdict"]
    assert printed["decisive_attacks"] == expected["decisive_attacks"]
    assert set(printed["rule_ids"]) == set(expected["rule_ids"])


def test_cli_subprocess_on_facts_file(tmp_path: Path) -> None:
    """The installed entry point on a bare facts file (D.4), in a fresh process without torch."""
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps(load(PACKAGED_VECTORS / "d4_recovery_control_matches.json")["facts"]))
    code = (
        "import sys\nfrom remnant.cli import main\nrc = main(['verdict', sys.argv[1]])\n"
        "assert 'torch' not in sys.modules\nsys.exit(rc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(facts)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert printed["verdict"] == "partial"
    assert any("recovery not specific to the removal" in r for r in printed["reasons"])
