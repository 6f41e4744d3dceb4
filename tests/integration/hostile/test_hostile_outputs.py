"""Nothing a user owns is ever overwritten: every command that writes is refused, before any work, when its output
is one of its own inputs, a non-empty folder remnant did not make for that output, or would be written through a
symbolic link out of a run or sweep folder (remnant.cli_paths, remnant.atomic).

Each case asserts exit 2, the path named, the requirement cited, and that every file that was there before (the
victim: the user's folder, the sweep, the base model, the statement, the file a link points at) is byte for byte
unchanged afterwards.

- ``sweep export`` onto a user's folder, the sweep folder, the pool's base model folder, the checkpoint store, a
  folder inside the sweep, ``--out .`` and ``--out ..`` (a real tiny sweep, built once);
- ``eval --out`` onto its data split, the model's ``config.json``, into the model folder, through a link; ``eval
  --samples`` onto its data split, into the model folder, onto its own log;
- ``sign --out`` onto the statement it signs (directly or through a link) or onto the key;
- a run folder's ``records.jsonl.torn``, ``records.jsonl`` or ``states`` that is a link out of the run, given to
  ``assess --resume`` and ``recompute``; a sweep folder's ``results.csv`` that is a link, given to ``sweep report``;
- a non-empty folder of the user's given as the output of ``preregister``, ``assess``, ``mint``, ``packs
  export``, ``keys generate``, ``study ...``, ``demo``, ``sweep run``, ``sweep report``; a folder remnant made as
  another kind (a run folder as a pack), or holding a marker remnant did not write;
- an output that is an input: ``packs export`` onto its pack, ``packs import`` onto its source, ``report --out``
  onto a run's statement or records, ``demo --vectors V --out V``, ``sweep run --out`` the base model or inside it.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
from harness import Hostile, check, ids

from remnant.cli import main
from remnant.cli_paths import MARKER_FILE, mark_output
from remnant.demo_vectors import PACKAGED_VECTORS

TESTS = Path(__file__).resolve().parents[2]
for folder in (TESTS / "integration", TESTS / "unit" / "sweep", TESTS / "unit" / "metrics"):
    sys.path.insert(0, str(folder))
from assess_fixtures import tiny_pack, write_config  # noqa: E402
from metrics_data import write_tofu_folder  # noqa: E402
from sweep_fixtures import tiny_spec, write_spec  # noqa: E402

Build = Callable[[Path], tuple[Sequence[str], str]]
#: Cases that must be refused before a model would be read name this one, which does not exist.
NO_MODEL = Path("/nonexistent/tiny")


def _user_folder(tmp: Path, name: str = "mine") -> Path:
    """A folder of the user's: not empty, no remnant marker."""
    path = tmp / name
    path.mkdir(parents=True)
    (path / "thesis.tex").write_text("precious\n", encoding="utf-8")
    return path


def _victim(tmp: Path) -> Path:
    path = tmp / "victim.txt"
    path.write_text("outside the run\n", encoding="utf-8")
    return path


def _model_folder(tmp: Path) -> Path:
    """Enough of a model folder for a command refused before it loads one."""
    folder = tmp / "model"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"model_type": "llama"}\n', encoding="utf-8")
    return folder


def _config(tmp: Path) -> Path:
    return Path(write_config(tmp / "c.toml", pack=tiny_pack(tmp / "pack"), control=tmp / "control"))


def _run(tmp: Path) -> tuple[Path, Path]:
    """A config and its run folder, pre-registered (what ``remnant preregister`` makes)."""
    from remnant.config import load_config
    from remnant.prereg import freeze

    config = _config(tmp)
    freeze(load_config(config), tmp / "run")
    mark_output(tmp / "run", "run")
    return config, tmp / "run"


# ---- eval ----


def _eval(out: Callable[[Path, Path, Path], Path]) -> Build:
    def build(tmp: Path) -> tuple[Sequence[str], str]:
        data, model = write_tofu_folder(tmp / "tofu"), _model_folder(tmp)
        target = out(tmp, data, model)
        return ["eval", str(model), "--data", str(data), "--out", str(target), "--no-progress"], str(target)

    return build


def _eval_samples(out: Callable[[Path, Path, Path], Path]) -> Build:
    """``eval --samples`` (the per-item samples page) aimed at what the evaluation reads or writes."""

    def build(tmp: Path) -> tuple[Sequence[str], str]:
        data, model = write_tofu_folder(tmp / "tofu"), _model_folder(tmp)
        target = out(tmp, data, model)
        argv = ["eval", str(model), "--data", str(data), "--out", str(tmp / "log.json"), "--samples"]
        return [*argv, str(target), "--no-progress"], str(target)

    return build


def _link_to_victim(tmp: Path, data: Path, model: Path) -> Path:
    os.symlink(_victim(tmp), tmp / "log.json")
    return tmp / "log.json"


# ---- sign ----


def _sign(out: Callable[[Path, Path, Path], Path]) -> Build:
    def build(tmp: Path) -> tuple[Sequence[str], str]:
        from remnant.statement.example import example_statement
        from remnant.statement.keys import generate_keypair

        statement = tmp / "s.json"
        statement.write_text(json.dumps(example_statement().model_dump(mode="json", by_alias=True)))
        key, _ = generate_keypair(tmp / "keys")
        target = out(tmp, statement, key)
        return ["sign", str(statement), "--key", str(key), "--out", str(target)], str(target)

    return build


def _statement_link(tmp: Path, statement: Path, key: Path) -> Path:
    os.symlink(statement, tmp / "envelope.json")
    return tmp / "envelope.json"


# ---- run and sweep folders holding links ----


def _run_link(name: str, argv: Callable[[Path, Path], list[str]]) -> Build:
    """A pre-registered run whose ``name`` is a link out of the run (a torn tail waiting to be repaired)."""

    def build(tmp: Path) -> tuple[Sequence[str], str]:
        config, run = _run(tmp)
        (run / "records.jsonl").write_bytes(b'{"torn')  # a torn last line: --resume would repair it
        if name == "records.jsonl":
            (run / name).unlink()
        os.symlink(_victim(tmp) if name != "states" else tmp, run / name)
        return argv(config, run), str(run / name)

    return build


def _fake_sweep(tmp: Path) -> Path:
    """A sweep folder as ``sweep run`` leaves it, as far as the commands refused here read it."""
    sweep = tmp / "sw"
    sweep.mkdir()
    plan: dict[str, object] = {
        "run_id": "r",
        "spec": {},
        "pool": {"models": []},
        "store": str(tmp / "store"),
        "base_path": None,
    }
    (sweep / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    mark_output(sweep, "sweep")
    return sweep


def _sweep_report_link(tmp: Path) -> tuple[Sequence[str], str]:
    sweep = _fake_sweep(tmp)
    os.symlink(_victim(tmp), sweep / "results.csv")
    return ["sweep", "report", str(sweep)], str(sweep / "results.csv")


# ---- non-empty folders remnant did not make ----


def _onto_user_folder(argv: Callable[[Path, Path], list[str]]) -> Build:
    def build(tmp: Path) -> tuple[Sequence[str], str]:
        mine = _user_folder(tmp)
        return argv(tmp, mine), str(mine)

    return build


def _mint_onto_run(tmp: Path) -> tuple[Sequence[str], str]:
    _, run = _run(tmp)
    return ["mint", "--class", "D", "--out", str(run), "--entities", "8"], str(run)


def _mint_onto_forged_marker(tmp: Path) -> tuple[Sequence[str], str]:
    mine = _user_folder(tmp)
    (mine / MARKER_FILE).write_text('{"kind": "pack"}', encoding="utf-8")  # not what remnant writes
    return ["mint", "--class", "D", "--out", str(mine), "--entities", "8"], str(mine)


def _keys_onto_own_keys(tmp: Path) -> tuple[Sequence[str], str]:
    """A key folder remnant made (marker and all): a second ``keys generate`` would lose its private key."""
    from remnant.statement.keys import generate_keypair

    keys = tmp / "keys"
    generate_keypair(keys)
    mark_output(keys, "keys")
    return ["keys", "generate", "--out", str(keys)], "remnant.key"


# ---- outputs that are inputs ----


def _packs_export_onto_pack(tmp: Path) -> tuple[Sequence[str], str]:
    pack = tiny_pack(tmp / "pack")
    return ["packs", "export", "--format", "tofu", str(pack), "--out", str(pack)], str(pack)


def _packs_import_onto_source(tmp: Path) -> tuple[Sequence[str], str]:
    source = write_tofu_folder(tmp / "tofu")
    return ["packs", "import", "--format", "tofu", str(source), "--out", str(source)], str(source)


def _report_onto(name: str) -> Build:
    def build(tmp: Path) -> tuple[Sequence[str], str]:
        run = tmp / "run"
        run.mkdir()
        (run / "statement.json").write_text('{"precious": true}\n', encoding="utf-8")
        (run / "records.jsonl").write_text("", encoding="utf-8")
        return ["report", str(run), "--out", str(run / name)], str(run / name)

    return build


def _vectors_onto_vectors(tmp: Path) -> tuple[Sequence[str], str]:
    vectors = tmp / "vectors"
    shutil.copytree(PACKAGED_VECTORS, vectors)
    return ["demo", "--vectors", str(vectors), "--out", str(vectors)], str(vectors)


def _sweep_run_onto_base(inside: bool) -> Build:
    def build(tmp: Path) -> tuple[Sequence[str], str]:
        base = _model_folder(tmp)
        spec = write_spec(tmp, tiny_spec(base, tmp / "store"))
        out = base / "sweep" if inside else base
        return ["sweep", "run", str(spec), "--out", str(out), "--quiet"], str(out)

    return build


CASES: list[Hostile] = [
    Hostile("eval-out-onto-data-split", _eval(lambda t, d, m: d / "forget10_perturbed.json"), "R23"),
    Hostile("eval-out-onto-model-config", _eval(lambda t, d, m: m / "config.json"), "R23"),
    Hostile("eval-out-into-model-folder", _eval(lambda t, d, m: m / "TOFU_EVAL.json"), "R23"),
    Hostile("eval-out-into-data-folder", _eval(lambda t, d, m: d / "TOFU_EVAL.json"), "R23"),
    Hostile("eval-out-a-link", _eval(_link_to_victim), "R23"),
    Hostile(
        "eval-samples-onto-data-split", _eval_samples(lambda t, d, m: d / "forget10_perturbed.json"), "R23"
    ),
    Hostile("eval-samples-into-model-folder", _eval_samples(lambda t, d, m: m / "samples.html"), "R23"),
    Hostile("eval-samples-onto-its-log", _eval_samples(lambda t, d, m: t / "log.json"), "R23"),
    Hostile("sign-out-onto-statement", _sign(lambda t, s, k: s), "K5"),
    Hostile("sign-out-onto-statement-via-link", _sign(_statement_link), "K5"),
    Hostile("sign-out-onto-key", _sign(lambda t, s, k: k), "K5"),
    Hostile(
        "torn-file-link-assess-resume",
        _run_link("records.jsonl.torn", lambda c, r: ["assess", str(c), "--out", str(r), "--resume"]),
        "R23",
    ),
    Hostile(
        "torn-file-link-recompute", _run_link("records.jsonl.torn", lambda c, r: ["recompute", str(r)]), "R23"
    ),
    Hostile("records-link-recompute", _run_link("records.jsonl", lambda c, r: ["recompute", str(r)]), "R23"),
    Hostile(
        "states-link-assess-resume",
        _run_link("states", lambda c, r: ["assess", str(c), "--out", str(r), "--resume"]),
        "R23",
    ),
    Hostile("sweep-report-results-link", _sweep_report_link, "R23"),
    Hostile(
        "preregister-onto-user-folder",
        _onto_user_folder(lambda t, o: ["preregister", str(_config(t)), "--out", str(o)]),
        "R14",
    ),
    Hostile(
        "assess-onto-user-folder",
        _onto_user_folder(lambda t, o: ["assess", str(_config(t)), "--out", str(o)]),
        "R14",
    ),
    Hostile(
        "mint-onto-user-folder",
        _onto_user_folder(lambda t, o: ["mint", "--class", "D", "--out", str(o), "--entities", "8"]),
        "R2",
    ),
    Hostile("mint-onto-a-run-folder", _mint_onto_run, "R2"),
    Hostile("mint-onto-a-forged-marker", _mint_onto_forged_marker, "R2"),
    Hostile(
        "packs-export-onto-user-folder",
        _onto_user_folder(
            lambda t, o: ["packs", "export", "--format", "tofu", str(tiny_pack(t / "pack")), "--out", str(o)]
        ),
        "R2",
    ),
    Hostile("packs-export-onto-its-pack", _packs_export_onto_pack, "R2"),
    Hostile("packs-import-onto-its-source", _packs_import_onto_source, "R2"),
    Hostile(
        "keys-onto-user-folder", _onto_user_folder(lambda t, o: ["keys", "generate", "--out", str(o)]), "K5"
    ),
    Hostile(
        "study-latent-probe-onto-user-folder",
        _onto_user_folder(lambda t, o: ["study", "latent-probe", "--preset", "tiny", "--out", str(o)]),
        "C-H7",
    ),
    Hostile(
        "study-preregister-onto-user-folder",
        _onto_user_folder(lambda t, o: ["study", "preregister", "meta-eval", "--out", str(o)]),
        "R14",
    ),
    Hostile(
        "study-summary-onto-user-folder",
        _onto_user_folder(lambda t, o: ["study", "summary", "--meta-eval", str(t), "--out", str(o)]),
        "R22",
    ),
    Hostile(
        "demo-onto-user-folder", _onto_user_folder(lambda t, o: ["demo", "--quick", "--out", str(o)]), "R23"
    ),
    Hostile("keys-onto-own-key-folder", _keys_onto_own_keys, "K5"),
    Hostile("demo-vectors-out-onto-vectors", _vectors_onto_vectors, "R23"),
    Hostile("report-out-onto-statement", _report_onto("statement.json"), "R22"),
    Hostile("report-out-onto-records", _report_onto("records.jsonl"), "R22"),
    Hostile(
        "sweep-run-onto-user-folder",
        _onto_user_folder(
            lambda t, o: [
                "sweep",
                "run",
                str(write_spec(t, tiny_spec(NO_MODEL, t / "store"))),
                "--out",
                str(o),
            ]
        ),
        "R14",
    ),
    Hostile("sweep-run-onto-base-model", _sweep_run_onto_base(inside=False), "R14"),
    Hostile("sweep-run-inside-base-model", _sweep_run_onto_base(inside=True), "R14"),
    Hostile("sweep-report-a-user-folder", _onto_user_folder(lambda t, o: ["sweep", "report", str(o)]), "R23"),
]


def _snapshot(*roots: Path) -> dict[Path, bytes]:
    """Every file under ``roots`` (links not followed) with its bytes."""
    return {
        p: p.read_bytes() for root in roots for p in root.rglob("*") if p.is_file() and not p.is_symlink()
    }


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_an_output_that_would_destroy_is_refused(
    case: Hostile, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before: dict[Path, bytes] = {}

    def build(tmp: Path) -> tuple[Sequence[str], str]:
        argv, named = case.build(tmp)
        before.update(_snapshot(tmp))  # after the inputs are written, before the command runs
        return argv, named

    text = check(Hostile(case.id, build, case.requirement), tmp_path, capsys)
    assert "nothing written" in text, text
    assert len(text.strip().splitlines()) == 1, text
    assert before
    for path, data in before.items():  # the victim, and everything else that was there, unchanged
        assert path.read_bytes() == data, path


# ---- sweep export, on a real tiny sweep ----


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory, tiny_llama_dir: Path) -> Iterator[dict[str, Path]]:
    """A tiny sweep (one install, one NPO removal) whose base model is this module's own copy."""
    root = tmp_path_factory.mktemp("outputs-sweep")
    base = root / "base"
    shutil.copytree(tiny_llama_dir, base)
    spec = write_spec(root, tiny_spec(base, root / "store"))
    assert main(["sweep", "run", str(spec), "--out", str(root / "sw"), "--quiet"]) == 0
    yield {"sweep": root / "sw", "base": base, "store": root / "store"}


def _export_to(out: Callable[[Path, Path, dict[str, Path]], Path]) -> Callable[[dict[str, Path]], Build]:
    def bind(sw: dict[str, Path]) -> Build:
        def build(tmp: Path) -> tuple[Sequence[str], str]:
            sweep = tmp / "sw"
            shutil.copytree(sw["sweep"], sweep, symlinks=True)
            target = out(tmp, sweep, sw)
            return ["sweep", "export", str(sweep), "target-full-s0", "--out", str(target)], str(target)

        return build

    return bind


SWEEP_CASES: list[tuple[str, Callable[[dict[str, Path]], Build]]] = [
    ("sweep-export-onto-user-folder", _export_to(lambda t, s, sw: _user_folder(t))),
    ("sweep-export-onto-the-sweep", _export_to(lambda t, s, sw: s)),
    ("sweep-export-onto-the-base-model", _export_to(lambda t, s, sw: sw["base"])),
    ("sweep-export-onto-the-store", _export_to(lambda t, s, sw: sw["store"])),
    ("sweep-export-inside-the-sweep", _export_to(lambda t, s, sw: s / "exported")),
    ("sweep-export-inside-the-base-model", _export_to(lambda t, s, sw: sw["base"] / "exported")),
]


@pytest.mark.parametrize("name,bind", SWEEP_CASES, ids=[n for n, _ in SWEEP_CASES])
def test_sweep_export_never_replaces_what_it_reads(
    name: str,
    bind: Callable[[dict[str, Path]], Build],
    swept: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    before: dict[Path, bytes] = {}

    def build(tmp: Path) -> tuple[Sequence[str], str]:
        argv, named = bind(swept)(tmp)
        before.update(_snapshot(tmp, swept["base"], swept["store"]))
        return argv, named

    text = check(Hostile(name, build, "R23"), tmp_path, capsys)
    assert "nothing written" in text and len(text.strip().splitlines()) == 1, text
    for path, data in before.items():
        assert path.read_bytes() == data, path
    assert not (swept["base"] / "exported").exists()


@pytest.mark.parametrize("where", ["user-folder", "the-sweep", "above"])
def test_sweep_export_out_dot_is_refused_without_a_traceback(
    where: str,
    swept: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``--out .`` (or ``..``) names the working folder or one above it: replacing it whole is refused (it used to
    end in a traceback from the rename of ``.``)."""
    sweep = tmp_path / "sw"
    shutil.copytree(swept["sweep"], sweep, symlinks=True)
    cwd = sweep if where == "the-sweep" else _user_folder(tmp_path)
    if where == "above":
        cwd = cwd / "deep"
        cwd.mkdir()
    monkeypatch.chdir(cwd)
    out = ".." if where == "above" else "."
    before = _snapshot(tmp_path)

    def build(tmp: Path) -> tuple[Sequence[str], str]:
        return ["sweep", "export", str(sweep), "target-full-s0", "--out", out], f"--out {out}"

    text = check(Hostile(f"out-dot-{where}", build, "R23"), tmp_path, capsys)
    assert "nothing written" in text, text
    assert _snapshot(tmp_path) == before


def test_sweep_export_writes_a_fresh_folder_and_replaces_only_its_own(
    swept: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The other branch: a new folder, an empty one, and a folder a previous export made are written."""
    sweep = swept["sweep"]
    fresh, empty = tmp_path / "fresh", tmp_path / "empty"
    empty.mkdir()
    for out in (fresh, empty, fresh):  # the third replaces the first export's folder whole
        assert main(["sweep", "export", str(sweep), "target-full-s0", "--out", str(out)]) == 0
        assert json.loads((out / MARKER_FILE).read_text())["kind"] == "model"
        assert (out / "config.json").is_file()
    capsys.readouterr()
    (fresh / "stale.txt").write_text("made by the export's owner\n")
    assert main(["sweep", "export", str(sweep), "target-full-s0", "--out", str(fresh)]) == 0
    assert not (fresh / "stale.txt").exists()  # remnant's own folder is replaced whole, as documented


def test_there_are_enough_cases() -> None:
    assert len(CASES) + len(SWEEP_CASES) >= 35
