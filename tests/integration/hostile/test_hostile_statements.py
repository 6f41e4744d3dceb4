"""Hostile conformance statements given to ``remnant validate STATEMENT.json`` and ``remnant sign STATEMENT --key``.

Exit codes (V1): 2 when the file cannot be read as a statement at all — not JSON, empty, a duplicate key,
NaN or Infinity (or a number that overflows to it), nesting past 64 levels, a folder, a missing file, an integer
past a double's range, not UTF-8, a top-level value that is not an object — with the file named and K4 cited; 1
when it reads but contradicts itself or the Standard: ``validate`` prints the violations as JSON on stdout and names
the file and the first violation on stderr, ``sign`` refuses in one line and writes nothing.

The self-contradictions are the Annex D.2 example, and a statement from a tiny real assessment (the tiny Llama, a
Class D pack: the session's ``chained_run``, tests/integration/conftest.py), each edited in one place the way a hand-made statement would
claim more than its evidence: a cell above τ under a *removed* verdict, a utility block below φ, a required
surface deleted, verdict and facts moved together past their cells, g* or its interval changed, a tier the
evidence cannot carry.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from harness import Hostile, check, ids

from remnant.cli import main
from remnant.statement.example import example_statement
from remnant.statement.keys import generate_keypair
from remnant.stats import wilson_interval

Edit = Callable[[dict[str, Any]], None]


def example() -> dict[str, Any]:
    return example_statement().model_dump(mode="json", by_alias=True)


def example_text() -> str:
    return json.dumps(example(), indent=2)


def cell(d: dict[str, Any], cell_id: str) -> dict[str, Any]:
    return next(c for c in d["cells"] if c["cell_id"] == cell_id)


def recount(c: dict[str, Any], k: int) -> None:
    """A cell's k with a rate and interval that agree with it (R19), as a careful forger would write them."""
    c.update(k=k, rate=k / c["n"], ci95=list(wilson_interval(k, c["n"])))


# ---- unreadable as a statement: exit 2, the file named, K4 ----------------------------------------------------


def _text(name: str, text: str | bytes) -> Callable[[Path], tuple[list[str], str]]:
    def build(tmp: Path) -> tuple[list[str], str]:
        path = tmp / name
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8")
        return ["validate", str(path)], str(path)

    return build


def _lazy(name: str, make: Callable[[], str | bytes]) -> Callable[[Path], tuple[list[str], str]]:
    def build(tmp: Path) -> tuple[list[str], str]:
        return _text(name, make())(tmp)

    return build


def _folder(tmp: Path) -> tuple[list[str], str]:
    (tmp / "statement.json").mkdir()
    return ["validate", str(tmp / "statement.json")], str(tmp / "statement.json")


def _missing(tmp: Path) -> tuple[list[str], str]:
    return ["validate", str(tmp / "absent.json")], str(tmp / "absent.json")


def _replace_once(old: str, new: str) -> Callable[[], str]:
    def make() -> str:
        text = example_text()
        assert text.count(old) >= 1, old
        return text.replace(old, new, 1)

    return make


UNREADABLE = [
    Hostile("not-json", _text("statement.json", "{verdict: removed}"), requirement="K4"),
    Hostile("empty-file", _text("statement.json", ""), requirement="K4"),
    Hostile("truncated", _lazy("statement.json", lambda: example_text()[:700]), requirement="K4"),
    Hostile(
        "duplicate-verdict",
        _text("statement.json", '{"verdict": "hidden", "verdict": "removed"}'),
        requirement="K4",
    ),
    Hostile(
        "duplicate-k-in-facts",
        _lazy("statement.json", _replace_once('"k": 9,', '"k": 9, "k": 200,')),
        requirement="K4",
    ),
    Hostile(
        "nan-utility",
        _lazy("statement.json", _replace_once('"removal_stage": 0.97', '"removal_stage": NaN')),
        requirement="K4",
    ),
    Hostile(
        "infinity-tau",
        _lazy("statement.json", _replace_once('"tau": 0.5', '"tau": Infinity')),
        requirement="K4",
    ),
    Hostile(
        "minus-infinity-rate",
        _lazy("statement.json", _replace_once('"rate": 0.03', '"rate": -Infinity')),
        requirement="K4",
    ),
    Hostile(
        "overflow-to-infinity",
        _lazy("statement.json", _replace_once('"attack_stage": 0.99', '"attack_stage": 1e999')),
        requirement="K4",
    ),
    Hostile(
        "deep-nesting",
        _lazy("statement.json", _replace_once('"deviations": []', '"deviations": ' + "[" * 100 + "]" * 100)),
        requirement="K4",
    ),
    Hostile("folder", _folder, requirement="K4"),
    Hostile("missing-file", _missing, requirement="K4"),
    Hostile(
        "integer-500-digits",
        _lazy("statement.json", _replace_once('"n": 300', '"n": ' + "9" * 500)),
        requirement="K4",
    ),
    Hostile(
        "integer-past-a-double",
        _lazy("statement.json", _replace_once('"k": 9,', '"k": ' + "9" * 350 + ",")),
        requirement="K4",
    ),
    Hostile(
        "not-utf8",
        _lazy("statement.json", lambda: b"\xff\xfe" + example_text().encode("utf-16-le")),
        requirement="K4",
    ),
    Hostile("top-level-array", _lazy("statement.json", lambda: "[" + example_text() + "]"), requirement="K4"),
    Hostile("top-level-string", _text("statement.json", '"removed"'), requirement="K4"),
    Hostile("top-level-null", _text("statement.json", "null"), requirement="K4"),
]


# ---- readable, but contradicting itself: exit 1 ----------------------------------------------------------------


def _edit(edit: Edit, *, command: str = "validate") -> Callable[[Path], tuple[list[str], str]]:
    def build(tmp: Path) -> tuple[list[str], str]:
        data = example()
        edit(data)
        path = tmp / "statement.json"
        path.write_text(json.dumps(data, indent=2), encoding="utf-8")
        if command == "sign":
            generate_keypair(tmp / "keys")
            return ["sign", str(path), "--key", str(tmp / "keys" / "remnant.key")], str(path)
        return ["validate", str(path)], str(path)

    return build


def _cell_above_tau(d: dict[str, Any]) -> None:  # facts still say 9/300 and removed
    recount(cell(d, "relearning/relearning/post_removal"), 200)


def _utility_below_phi(d: dict[str, Any]) -> None:
    d["utility"]["removal_stage"] = 0.5


def _relearning_surface_deleted(d: dict[str, Any]) -> None:
    d["cells"] = [c for c in d["cells"] if not c["cell_id"].startswith("relearning/")]
    del d["surfaces"]["relearning"]


def _prefill_deleted(d: dict[str, Any]) -> None:
    d["cells"] = [c for c in d["cells"] if not c["cell_id"].startswith("prefill/")]
    d["facts"]["attacks"] = [a for a in d["facts"]["attacks"] if a["name"] != "prefill"]
    d["surfaces"]["inference_time"]["cells"].remove("prefill/inference_time/post_removal")


def _verdict_and_facts_moved(d: dict[str, Any]) -> None:
    d["facts"]["attacks"][0]["k"] = 250
    d["verdict"] = "hidden"
    d["verdict_scope"] = d["verdict_scope"].replace("removed", "hidden", 1)


def _g_star(d: dict[str, Any]) -> None:
    d["surfaces"]["inference_time"]["g_star"] = 0.01


def _g_star_interval(d: dict[str, Any]) -> None:
    d["surfaces"]["relearning"]["ci95"] = [0.0, 0.2]


def _control_g(d: dict[str, Any]) -> None:
    d["surfaces"]["relearning"]["control_g"] = 0.5


def _facts_phi(d: dict[str, Any]) -> None:
    d["facts"]["phi"] = 0.5


def _status_not_applicable(d: dict[str, Any]) -> None:
    fact = d["facts"]["attacks"][2]
    fact.update(
        status="not_applicable", reason="no chat template", k=None, n=None, control_k=None, control_n=None
    )


def _orphan_cell(d: dict[str, Any]) -> None:
    gcg = {**cell(d, "prefill/inference_time/post_removal"), "cell_id": "gcg/inference_time/post_removal"}
    gcg["attack"] = "gcg"
    recount(gcg, 290)
    d["cells"].append(gcg)


def _cell_k_wrong_type(d: dict[str, Any]) -> None:
    d["cells"][0]["k"] = "nine"


def _non_adjudicating_prefill(d: dict[str, Any]) -> None:
    d["facts"]["attacks"][1]["adjudicating"] = False


def _tier_on_small_n(d: dict[str, Any]) -> None:
    for c in d["cells"]:
        c.update(n=20, k=0, rate=0.0, ci95=list(wilson_interval(0, 20)))
    for a in d["facts"]["attacks"]:
        a.update(k=0, n=20, control_k=0, control_n=20)
    for s in d["surfaces"].values():
        interval = list(wilson_interval(0, 20))
        s.update(g_star=0.0, ci95=interval, n=20, control_g=0.0, control_ci95=interval, control_n=20)
    d["surfaces"]["inference_time"]["decisive_attack"] = "prefill"
    d["surfaces"]["inference_time"]["cells"][-1] = "prefill/inference_time/control"


CONTRADICTIONS = [
    Hostile("cell-above-tau", _edit(_cell_above_tau), requirement="V1", exit_code=1),
    Hostile("utility-block-below-phi", _edit(_utility_below_phi), requirement="R13", exit_code=1),
    Hostile("relearning-surface-deleted", _edit(_relearning_surface_deleted), requirement="C1", exit_code=1),
    Hostile("prefill-deleted", _edit(_prefill_deleted), requirement="C-Q1", exit_code=1),
    Hostile("verdict-and-facts-moved", _edit(_verdict_and_facts_moved), requirement="V1", exit_code=1),
    Hostile("g-star", _edit(_g_star), requirement="R22", exit_code=1),
    Hostile("g-star-interval", _edit(_g_star_interval), requirement="R19", exit_code=1),
    Hostile("control-g", _edit(_control_g), requirement="R4", exit_code=1),
    Hostile("facts-phi", _edit(_facts_phi), requirement="V1", exit_code=1),
    Hostile("not-applicable-with-cells", _edit(_status_not_applicable), requirement="R22", exit_code=1),
    Hostile("cell-of-no-attack", _edit(_orphan_cell), requirement="R22", exit_code=1),
    Hostile("cell-k-wrong-type", _edit(_cell_k_wrong_type), requirement="R19", exit_code=1),
    Hostile("required-attack-set-aside", _edit(_non_adjudicating_prefill), requirement="C-W6", exit_code=1),
    Hostile("tier-above-n", _edit(_tier_on_small_n), requirement="R21", exit_code=1),
    Hostile(
        "facts-attacks-not-a-list",
        _edit(lambda d: d["facts"].update(attacks=3)),
        requirement="V1",
        exit_code=1,
    ),
    Hostile(
        "chance-rate-a-string",
        _edit(lambda d: d["facts"].update(chance_rate="a quarter")),
        requirement="V1",
        exit_code=1,
    ),
]

SIGN = [
    Hostile("sign-cell-above-tau", _edit(_cell_above_tau, command="sign"), requirement="R22", exit_code=1),
    Hostile(
        "sign-utility-below-phi", _edit(_utility_below_phi, command="sign"), requirement="R13", exit_code=1
    ),
    Hostile(
        "sign-relearning-deleted",
        _edit(_relearning_surface_deleted, command="sign"),
        requirement="R22",
        exit_code=1,
    ),
    Hostile("sign-g-star-interval", _edit(_g_star_interval, command="sign"), requirement="R19", exit_code=1),
    Hostile(
        "sign-manifest-ref-omitted",
        _edit(lambda d: d.pop("manifest_ref"), command="sign"),
        requirement="K6",
        exit_code=1,
    ),
    Hostile(
        "sign-verdict-is-a-tier",
        _edit(lambda d: d.update(verdict="W4"), command="sign"),
        requirement="T1",
        exit_code=1,
    ),
]


def _sign_unreadable(text: str) -> Callable[[Path], tuple[list[str], str]]:
    def build(tmp: Path) -> tuple[list[str], str]:
        path = tmp / "statement.json"
        path.write_text(text, encoding="utf-8")
        generate_keypair(tmp / "keys")
        return ["sign", str(path), "--key", str(tmp / "keys" / "remnant.key")], str(path)

    return build


SIGN_UNREADABLE = [
    Hostile("sign-nan", _sign_unreadable('{"tau": NaN}'), requirement="K4"),
    Hostile("sign-top-level-array", _sign_unreadable("[]"), requirement="K4"),
]

CASES = UNREADABLE + CONTRADICTIONS + SIGN + SIGN_UNREADABLE


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_hostile_statement(case: Hostile, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = check(case, tmp_path, capsys)
    assert not list(tmp_path.glob("**/*.dsse.json")), "an envelope was written for a refused statement"
    if case.exit_code == 1 and case.id.startswith("sign-"):
        assert len(text.strip().splitlines()) == 1, text  # one line: the file, the count, the first violation
    elif case.exit_code == 1:
        report = json.loads(text[text.index("{") :])  # stderr's line, then the report on stdout
        assert report["conformant"] is False
        assert case.requirement in {v["requirement"] for v in report["violations"]}


def test_enough_cases() -> None:
    assert len(CASES) + len(REAL) >= 35


# ---- a statement from a tiny real assessment, edited ---------------------------------------------------------


@pytest.fixture(scope="module")
def real_statement(chained_run: Path) -> dict[str, Any]:
    """The statement of the session's tiny Class D assessment (tests/integration/conftest.py: W-track, relearning
    at budgets 4 and 8, retain utility), read and never written back."""
    data: dict[str, Any] = json.loads((chained_run / "statement.json").read_text(encoding="utf-8"))
    return data


def _primary_cell_alone(d: dict[str, Any]) -> None:
    """prefill's own cell edited above τ; facts and its final reading cell left at their counts."""
    recount(cell(d, "prefill/inference_time/post_removal"), 5)


def _prefill_everywhere(d: dict[str, Any]) -> None:
    """prefill at 5/6 in its cells, its reading and its facts; the surface left at 0/6. (The verdict stays partial
    either way: this run measured no removal-stage utility, R13.)"""
    recount(cell(d, "prefill/inference_time/post_removal"), 5)
    recount(cell(d, "prefill/inference_time/post_removal/kappa@final"), 5)
    next(a for a in d["facts"]["attacks"] if a["name"] == "prefill")["k"] = 5


def _relearning_checkpoint(d: dict[str, Any]) -> None:
    recount(cell(d, "relearning/relearning/post_removal/kappa@budget=8/step=4"), 6)


def _relearning_cells_deleted(d: dict[str, Any]) -> None:
    d["cells"] = [c for c in d["cells"] if not c["cell_id"].startswith("relearning/relearning/")]


def _utility_cell(d: dict[str, Any]) -> None:
    """The pre-removal retain cell edited to 6/6: the cells now give u = 0/6 ÷ 6/6 = 0 < φ, the facts none."""
    recount(cell(d, "none/utility/pre_removal/retain_kappa@removal_stage"), 6)


def _utility_block(d: dict[str, Any]) -> None:
    d["utility"]["removal_stage"] = 0.97


def _relearning_surface(d: dict[str, Any]) -> None:
    del d["surfaces"]["relearning"]


def _tier_w3(d: dict[str, Any]) -> None:
    d["tier"] = "W3"


def _real_g_star(d: dict[str, Any]) -> None:
    d["surfaces"]["inference_time"]["g_star"] = 0.5


REAL: dict[str, tuple[str, Edit]] = {
    "real-primary-cell-alone": ("R22", _primary_cell_alone),
    "real-prefill-everywhere": ("R22", _prefill_everywhere),
    "real-relearning-checkpoint": ("R22", _relearning_checkpoint),
    "real-relearning-cells-deleted": ("R22", _relearning_cells_deleted),
    "real-utility-cell": ("R11", _utility_cell),
    "real-utility-cell-verdict": ("V1", _utility_cell),
    "real-utility-block": ("R13", _utility_block),
    "real-relearning-surface-deleted": ("D-5.3", _relearning_surface),
    "real-tier-above-n": ("R21", _tier_w3),
    "real-g-star": ("R22", _real_g_star),
}


def test_real_statement_validates_and_signs(real_statement: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "statement.json"
    path.write_text(json.dumps(real_statement), encoding="utf-8")
    assert main(["validate", str(path)]) == 0
    generate_keypair(tmp_path / "keys")
    assert main(["sign", str(path), "--key", str(tmp_path / "keys" / "remnant.key")]) == 0
    assert (tmp_path / "statement.dsse.json").is_file()


@pytest.mark.parametrize("name", sorted(REAL))
def test_hostile_real_statement(
    name: str, real_statement: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    requirement, edit = REAL[name]

    def build(tmp: Path) -> tuple[list[str], str]:
        data = copy.deepcopy(real_statement)
        edit(data)
        path = tmp / "statement.json"
        path.write_text(json.dumps(data, indent=2), encoding="utf-8")
        return ["validate", str(path)], str(path)

    text = check(Hostile(name, build, requirement=requirement, exit_code=1), tmp_path, capsys)
    report = json.loads(text[text.index("{") :])
    assert requirement in {v["requirement"] for v in report["violations"]}
    generate_keypair(tmp_path / "keys")
    argv = ["sign", str(tmp_path / "statement.json"), "--key", str(tmp_path / "keys" / "remnant.key")]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "remnant sign: refused" in err and "not conformant" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "statement.dsse.json").exists()
