"""The pure core runs where the model extra is not installed (docs/extending.md, §7): ``pip install remnant`` validates,
verifies, draws verdicts, recomputes a run from its records and writes its reports.

Every core module is imported, and the core commands run, in a child process where torch, transformers,
safetensors and the rest of the ``model`` extra are blocked (model_absent.py). A command that needs a model says
so in one line and exits 2 instead of ending in an ImportError traceback.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from core_modules import CORE
from model_absent import BLOCKER, run_cli, run_python

import remnant
from remnant.cli import COMMAND_MODULES, MODEL_EXTRA_HINT
from remnant.demo_vectors import PACKAGED_VECTORS

VECTOR = PACKAGED_VECTORS / "d4_recovery_control_matches.json"
INTEGRATION = Path(__file__).resolve().parents[2] / "integration"


@pytest.fixture(scope="module")
def core_run(tmp_path_factory: pytest.TempPathFactory, tiny_llama_dir: Path) -> Path:
    """One complete assessment on the tiny random Llama (tests/integration/records_fixtures.py), written with
    the model extra present, as an assessor would receive it: the run folder without its trained states."""
    if str(INTEGRATION) not in sys.path:
        sys.path.insert(0, str(INTEGRATION))
    from records_fixtures import assess_once, copy_run

    run = assess_once(tmp_path_factory.mktemp("core-assess"), tiny_llama_dir)
    return copy_run(run, tmp_path_factory.mktemp("core-run") / "run")


_IMPORT_ALL = """
import importlib, json
failed = {}
for name in json.loads(sys.argv[1]):
    try:
        importlib.import_module(name)
    except Exception as exc:  # report every module, not only the first that fails
        failed[name] = f"{type(exc).__name__}: {exc}"
print(json.dumps({"failed": failed, "loaded": sorted(m for m in BLOCKED if m in sys.modules)}))
"""


@pytest.fixture(scope="module")
def imported() -> dict[str, Any]:
    """Import every core module in one child process without the model extra."""
    done = subprocess.run(
        [sys.executable, "-c", BLOCKER + _IMPORT_ALL, json.dumps(CORE)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_the_walk_finds_the_core() -> None:
    """The module list is walked from the source, so a new core module is checked without editing this file."""
    assert len(CORE) > 60
    for name in ("remnant.statement.dsse", "remnant.standard.verdict", "remnant.packs.schema"):
        assert name in CORE
    assert "remnant.report.plots" in CORE and "remnant.formats.tofu" in CORE
    edge = ("remnant.models", "remnant.train", "remnant.attacks")
    # from the model edge, only the modules that add subcommands to the parser (they import nothing heavy)
    assert [m for m in CORE if m.startswith(edge)] == [m for m in COMMAND_MODULES if m.startswith(edge)]


@pytest.mark.parametrize("module", CORE)
def test_core_module_imports_without_the_model_extra(module: str, imported: dict[str, Any]) -> None:
    assert module not in imported["failed"], imported["failed"][module]


def test_nothing_of_the_model_extra_was_loaded(imported: dict[str, Any]) -> None:
    assert imported["loaded"] == []


def test_the_block_bites() -> None:
    """The child really cannot import torch: without this, every test above would pass on a broken block."""
    done = run_python("import torch\n")
    assert done.returncode == 1
    assert "ModuleNotFoundError: No module named 'torch'" in done.stderr


#: What a light start never loads (the issue's measured costs: scipy.stats ~1.2 s, torch and transformers more).
HEAVY = ("scipy", "torch", "transformers", "pandas", "pyarrow", "matplotlib")

#: Runs ``main(ARGV)`` in a fresh interpreter (the model extra installed, nothing blocked) and prints which of
#: HEAVY it loaded; ``--help`` ends in SystemExit, which is caught so the modules can still be listed.
_LOADED_AFTER = """
import json, sys
from remnant.cli import main
try:
    code = main(json.loads(sys.argv[1]))
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "loaded": [m for m in json.loads(sys.argv[2]) if m in sys.modules]}))
"""


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A conformant example statement, a key pair and the statement's DSSE envelope (K4, K5)."""
    from remnant.cli import main

    folder = tmp_path_factory.mktemp("light")
    assert main(["statement", "example", "--out", str(folder / "ex.json")]) == 0
    assert main(["keys", "generate", "--out", str(folder / "keys")]) == 0
    assert main(["sign", str(folder / "ex.json"), "--key", str(folder / "keys" / "remnant.key")]) == 0
    return folder


LIGHT_COMMANDS = {
    "version": lambda d: ["--version"],
    "help": lambda d: ["--help"],
    "validate": lambda d: ["validate", str(d / "ex.json")],
    "verify": lambda d: ["verify", str(d / "ex.dsse.json"), "--key", str(d / "keys" / "remnant.pub")],
    "verdict": lambda d: ["verdict", str(VECTOR)],
    "eval-help": lambda d: ["eval", "--help"],
}


@pytest.mark.parametrize("command", sorted(LIGHT_COMMANDS))
def test_core_commands_start_light(command: str, signed: Path) -> None:
    """A light start: the core commands run, where the model extra *is* installed, without importing scipy, torch,
    transformers, pandas, pyarrow or matplotlib (building the parser imports every command module, so a heavy
    import at module level anywhere would show here). The time is measured in benchmarks/bench_startup.py."""
    argv = LIGHT_COMMANDS[command](signed)
    done = subprocess.run(
        [sys.executable, "-c", _LOADED_AFTER, json.dumps(argv), json.dumps(HEAVY)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["code"] == 0, done.stderr
    assert result["loaded"] == [], f"remnant {' '.join(argv)} imported {result['loaded']}"


def test_the_light_start_check_bites(signed: Path) -> None:
    """The same child reports a heavy import when one happens: without this, an always-empty list would pass."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import scipy.stats\n" + _LOADED_AFTER,
            json.dumps(["--version"]),
            json.dumps(HEAVY),
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert json.loads(done.stdout.strip().splitlines()[-1])["loaded"] == ["scipy"]


def test_public_all_is_sorted() -> None:
    assert list(remnant.__all__) == sorted(remnant.__all__)


# -- the core commands, without the model extra ------------------------------------------------------------------


def _ok(done: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done


def test_help_lists_core_and_model_commands() -> None:
    out = _ok(run_cli(["--help"])).stdout
    for command in ("verdict", "validate", "verify", "recompute", "report", "assess", "mint"):
        assert f"\n    {command} " in out


def test_statement_example_validate_keys_sign_verify(tmp_path: Path) -> None:
    """K4 (a valid statement) and K5 (a DSSE envelope, Ed25519) end to end with the core alone."""
    _ok(run_cli(["statement", "example", "--out", "ex.json"], cwd=tmp_path))
    validated = json.loads(_ok(run_cli(["validate", "ex.json"], cwd=tmp_path)).stdout)
    assert validated == {"conformant": True, "violations": []}
    _ok(run_cli(["keys", "generate", "--out", "keys"], cwd=tmp_path))
    _ok(run_cli(["sign", "ex.json", "--key", "keys/remnant.key"], cwd=tmp_path))
    verified = json.loads(
        _ok(run_cli(["verify", "ex.dsse.json", "--key", "keys/remnant.pub"], cwd=tmp_path)).stdout
    )
    assert verified["verified"] is True
    assert verified["subject"][0]["name"] == "ex.json"
    # a changed payload no longer verifies: exit 1, a failed check (K5)
    envelope = json.loads((tmp_path / "ex.dsse.json").read_text())
    envelope["payload"] = envelope["payload"][:-4] + (
        "AAAA" if envelope["payload"][-4:] != "AAAA" else "BBBB"
    )
    (tmp_path / "bad.dsse.json").write_text(json.dumps(envelope))
    bad = run_cli(["verify", "bad.dsse.json", "--key", "keys/remnant.pub"], cwd=tmp_path)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "Traceback" not in bad.stderr


def test_verdict_on_a_published_vector() -> None:
    """Annex D.4 through the verdict engine: partial, recovery not specific to the removal (V1, V1a)."""
    expected = json.loads(VECTOR.read_text(encoding="utf-8"))["expected"]
    printed = json.loads(_ok(run_cli(["verdict", str(VECTOR)])).stdout)
    assert printed["verdict"] == expected["verdict"] == "partial"
    assert printed["g_star"] == pytest.approx(expected["g_star"])
    assert printed["g_star_ci95"] == pytest.approx(expected["g_star_ci95"])
    assert set(printed["rule_ids"]) == set(expected["rule_ids"])


def test_recompute_and_report_a_run_without_the_model_extra(core_run: Path) -> None:
    """An assessor with the records alone rebuilds the statement byte for byte and writes both reports (R23)."""
    statement = (core_run / "statement.json").read_bytes()
    manifest = (core_run / "manifest.json").read_bytes()
    (core_run / "report.html").unlink()
    printed = json.loads(_ok(run_cli(["recompute", str(core_run)])).stdout)
    assert (core_run / "statement.json").read_bytes() == statement
    assert (core_run / "manifest.json").read_bytes() == manifest
    assert printed["verdict"] == json.loads(statement)["verdict"]
    assert printed["manifest_ref"] == json.loads(statement)["manifest_ref"]
    assert (core_run / "report.html").is_file()

    for argv, page in (
        (["report", str(core_run)], "report.html"),
        (["report", str(core_run), "--customer"], "report-customer.html"),
    ):
        (core_run / page).unlink()
        done = _ok(run_cli(argv))
        assert done.stdout.strip() == str(core_run / page)
        html = (core_run / page).read_text(encoding="utf-8")
        assert "<svg" in html and "<script" not in html


def test_recompute_refuses_edited_records_without_the_model_extra(core_run: Path, tmp_path: Path) -> None:
    """The R23 checks are core too: a cell's k edited after the fact fails the check (exit 1) with torch absent,
    and the statement is left as it was."""
    from records_fixtures import copy_run, edited, entry, find, is_run_cell, read_lines, write_lines

    run = copy_run(core_run, tmp_path / "run")
    lines = read_lines(run)
    i = find(lines, is_run_cell)
    e = entry(lines[i])
    lines[i] = edited(lines[i], k=(e["k"] + 1) % (e["n"] + 1))
    write_lines(run, lines)
    statement = (run / "statement.json").read_bytes()
    done = run_cli(["recompute", str(run), "--no-reports"])
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.startswith("remnant recompute: check failed: "), done.stderr
    assert (
        f"line {i + 1} was edited" in done.stderr
        and "(R23)" in done.stderr
        and "Traceback" not in done.stderr
    )
    assert (run / "statement.json").read_bytes() == statement


def test_mint_without_the_model_extra_mints_the_same_pack(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Class D minting (names, attributes, the D2 collision filter) is core: the same pack, digest for digest, as
    with torch installed."""
    from remnant.cli import main

    argv = ["mint", "--class", "D", "--entities", "10", "--controls", "2", "--seed", "1"]
    core = _ok(run_cli([*argv, "--out", str(tmp_path / "core")])).stdout
    assert main([*argv, "--out", str(tmp_path / "full")]) == 0
    full = capsys.readouterr().out
    assert "digest sha256:" in core
    assert core.split("digest ")[1] == full.split("digest ")[1]


def test_plan_without_the_model_extra(core_run: Path) -> None:
    out = _ok(run_cli(["plan", str(core_run / "config.toml")])).stdout
    assert "n = 6 per cell (min_n 4)" in out


@pytest.mark.parametrize(
    "argv",
    [
        ["assess", "{run}/config.toml", "--out", "{tmp}/again"],
        ["methods", "list"],
        ["models", "list"],
    ],
    ids=["assess", "methods-list", "models-list"],
)
def test_model_commands_ask_for_the_model_extra(argv: list[str], core_run: Path, tmp_path: Path) -> None:
    done = run_cli([a.format(run=core_run, tmp=tmp_path) for a in argv])
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"remnant {argv[0]}: error: {MODEL_EXTRA_HINT} (")
    assert "needs the model extra: pip install 'remnant[model]'" in lines[0]
