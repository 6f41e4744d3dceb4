"""The command line never shows a traceback for bad input: each case ends in one line on stderr and exit 2.

- ``--out`` naming an existing file where a folder is expected, or a folder where a file is expected, for every
  command with ``--out``: refused before any work, the path named, nothing clobbered (remnant.cli_paths);
- ``remnant packs check --corpus`` with a missing corpus or a folder (R17);
- a run folder whose ``records.jsonl`` (or another run file) is a folder, or that is a file itself, given to
  ``assess --resume``, ``recompute`` and ``report``;
- deeply nested JSON or TOML given to every command that reads one (remnant.jsonio refuses it before a parser
  recurses into a RecursionError);
- an OSError about a user's path escaping a command is one line and exit 2; any other exception keeps its
  traceback (a bug must show);
- output piped into a reader that stops early (``remnant schema statement | head``): no traceback, no
  "Exception ignored" at interpreter exit.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from harness import Hostile, check, ids

from remnant.cli import main
from remnant.demo_vectors import PACKAGED_VECTORS

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from assess_fixtures import tiny_pack, write_config  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
REMNANT = Path(sys.executable).with_name("remnant")
Build = Callable[[Path], tuple[Sequence[str], str]]


def _file(tmp: Path, name: str = "taken", text: str = "precious\n") -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    path = tmp / name
    path.write_text(text, encoding="utf-8")
    return path


def _folder(tmp: Path, name: str = "taken") -> Path:
    path = tmp / name
    path.mkdir(parents=True)
    (path / "keep.txt").write_text("precious\n", encoding="utf-8")
    return path


def _config(tmp: Path) -> Path:
    pack = tiny_pack(tmp / "pack")
    return write_config(tmp / "c.toml", pack=pack, control=tmp / "control")


def _statement_and_key(tmp: Path) -> tuple[Path, Path]:
    from remnant.statement.example import example_statement
    from remnant.statement.keys import generate_keypair

    statement = tmp / "statement.json"
    statement.write_text(
        json.dumps(example_statement().model_dump(mode="json", by_alias=True)), encoding="utf-8"
    )
    private, _ = generate_keypair(tmp / "keys")
    return statement, private


def _run_with(tmp: Path, folder_named: str) -> Path:
    """A run folder (pre-registered for the tiny config) in which ``folder_named`` is a folder."""
    from remnant.config import load_config
    from remnant.prereg import freeze

    run = tmp / "run"
    freeze(load_config(_config(tmp)), run)
    (run / folder_named).mkdir()
    return run


# ---- --out where a folder is expected, naming a file (and the reverse) ----


def _out_file_for(argv: Callable[[Path, Path], list[str]]) -> Build:
    def build(tmp: Path) -> tuple[Sequence[str], str]:
        taken = _file(tmp)
        return argv(tmp, taken), str(taken)

    return build


def _out_folder_for(argv: Callable[[Path, Path], list[str]]) -> Build:
    def build(tmp: Path) -> tuple[Sequence[str], str]:
        taken = _folder(tmp)
        return argv(tmp, taken), str(taken)

    return build


def _sign_to(tmp: Path, out: Path) -> list[str]:
    statement, key = _statement_and_key(tmp)
    return ["sign", str(statement), "--key", str(key), "--out", str(out)]


def _sign_default_envelope_is_a_folder(tmp: Path) -> tuple[Sequence[str], str]:
    statement, key = _statement_and_key(tmp)
    envelope = _folder(tmp, "statement.dsse.json")
    return ["sign", str(statement), "--key", str(key)], str(envelope)


def _report_to(tmp: Path, out: Path) -> list[str]:
    (tmp / "run").mkdir()
    return ["report", str(tmp / "run"), "--out", str(out)]


def _mint_below_a_file(tmp: Path) -> tuple[Sequence[str], str]:
    taken = _file(tmp)
    return ["mint", "--class", "D", "--out", str(taken / "pack"), "--entities", "8"], str(taken)


# ---- packs check --corpus ----


def _corpus(kind: str) -> Build:
    def build(tmp: Path) -> tuple[Sequence[str], str]:
        pack = tiny_pack(tmp / "pack")
        corpus = tmp / "corpus"
        if kind == "folder":
            corpus.mkdir()
        good = _file(tmp, "good.txt", "nothing here")
        return ["packs", "check", str(pack), "--corpus", str(good), str(corpus)], str(corpus)

    return build


# ---- run folders whose files are folders ----


def _records_folder(argv: Callable[[Path, Path], list[str]]) -> Build:
    def build(tmp: Path) -> tuple[Sequence[str], str]:
        run = _run_with(tmp, "records.jsonl")
        return argv(tmp, run), str(run / "records.jsonl")

    return build


def _run_file_folder(name: str) -> Build:
    def build(tmp: Path) -> tuple[Sequence[str], str]:
        run = tmp / "run"
        run.mkdir(parents=True)
        (run / name).mkdir()
        return ["recompute", str(run)], str(run / name)

    return build


def _run_is_a_file(tmp: Path) -> tuple[Sequence[str], str]:
    run = _file(tmp, "run")
    return ["recompute", str(run)], str(run)


def _run_missing(tmp: Path) -> tuple[Sequence[str], str]:
    return ["report", str(tmp / "nowhere")], str(tmp / "nowhere")


CASES: list[Hostile] = [
    Hostile("mint-out-file", _out_file_for(lambda t, o: ["mint", "--class", "D", "--out", str(o)]), "R2"),
    Hostile("mint-out-below-a-file", _mint_below_a_file, "R2"),
    Hostile(
        "preregister-out-file",
        _out_file_for(lambda t, o: ["preregister", str(_config(t)), "--out", str(o)]),
        "R14",
    ),
    Hostile(
        "assess-out-file", _out_file_for(lambda t, o: ["assess", str(_config(t)), "--out", str(o)]), "R14"
    ),
    Hostile("keys-out-file", _out_file_for(lambda t, o: ["keys", "generate", "--out", str(o)]), "K5"),
    Hostile(
        "study-out-file",
        _out_file_for(lambda t, o: ["study", "latent-probe", "--preset", "tiny", "--out", str(o)]),
        "C-H7",
    ),
    Hostile("demo-out-file", _out_file_for(lambda t, o: ["demo", "--quick", "--out", str(o)]), "R23"),
    Hostile(
        "demo-vectors-out-file",
        _out_file_for(lambda t, o: ["demo", "--vectors", str(PACKAGED_VECTORS), "--out", str(o)]),
        "R23",
    ),
    Hostile(
        "statement-example-out-folder",
        _out_folder_for(lambda t, o: ["statement", "example", "--out", str(o)]),
        "K4",
    ),
    Hostile("sign-out-folder", _out_folder_for(_sign_to), "K5"),
    Hostile("sign-default-envelope-a-folder", _sign_default_envelope_is_a_folder, "K5"),
    Hostile("report-out-folder", _out_folder_for(_report_to), "R22"),
    Hostile("corpus-missing", _corpus("missing"), "R17"),
    Hostile("corpus-a-folder", _corpus("folder"), "R17"),
    Hostile("records-folder-recompute", _records_folder(lambda t, r: ["recompute", str(r)]), "R23"),
    Hostile(
        "records-folder-assess-resume",
        _records_folder(lambda t, r: ["assess", str(t / "c.toml"), "--out", str(r), "--resume"]),
        "R23",
    ),
    Hostile("records-folder-report", _records_folder(lambda t, r: ["report", str(r)]), "R23"),
    Hostile("prereg-a-folder", _run_file_folder("prereg.json"), "R14"),
    Hostile("config-copy-a-folder", _run_file_folder("config.toml"), "R24"),
    Hostile("statement-a-folder", _run_file_folder("statement.json"), "K4"),
    Hostile("run-is-a-file", _run_is_a_file, "R24"),
    Hostile("run-missing", _run_missing, "K4"),
]


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_cli_refuses_in_one_line(case: Hostile, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    text = check(case, tmp_path, capsys)
    assert len(text.strip().splitlines()) == 1, text
    for path, data in before.items():  # nothing that was there is clobbered
        assert path.read_bytes() == data, path


def test_there_are_enough_cases() -> None:
    assert len(CASES) >= 20


# ---- deep nesting, for every command that reads JSON or TOML ----

DEEP_JSON = "[" * 100_000 + "]" * 100_000
DEEP_TOML = "a = " + "[" * 100_000 + "]" * 100_000 + "\n"


def _deep(name: str, text: str, argv: Callable[[Path, Path], list[str]]) -> Build:
    def build(tmp: Path) -> tuple[Sequence[str], str]:
        path = tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return argv(tmp, path), str(path)

    return build


def _key(tmp: Path, public: bool = True) -> str:
    from remnant.statement.keys import generate_keypair

    private, pub = generate_keypair(tmp / "keys")
    return str(pub if public else private)


DEEP: list[tuple[str, Build]] = [
    ("verdict", _deep("facts.json", DEEP_JSON, lambda t, p: ["verdict", str(p)])),
    ("validate", _deep("statement.json", DEEP_JSON, lambda t, p: ["validate", str(p)])),
    ("sign", _deep("statement.json", DEEP_JSON, lambda t, p: ["sign", str(p), "--key", _key(t, False)])),
    ("verify", _deep("env.dsse.json", DEEP_JSON, lambda t, p: ["verify", str(p), "--key", _key(t)])),
    (
        "preregister",
        _deep("c.toml", DEEP_TOML, lambda t, p: ["preregister", str(p), "--out", str(t / "run")]),
    ),
    ("plan", _deep("c.toml", DEEP_TOML, lambda t, p: ["plan", str(p)])),
    ("assess", _deep("c.toml", DEEP_TOML, lambda t, p: ["assess", str(p), "--out", str(t / "run")])),
    ("recompute", _deep("run/config.toml", DEEP_TOML, lambda t, p: ["recompute", str(p.parent)])),
    ("report", _deep("run/statement.json", DEEP_JSON, lambda t, p: ["report", str(p.parent)])),
    ("packs-show", _deep("pack/pack.json", DEEP_JSON, lambda t, p: ["packs", "show", str(p.parent)])),
    (
        "packs-check",
        _deep(
            "pack/pack.json", DEEP_JSON, lambda t, p: ["packs", "check", str(p.parent), "--corpus", str(p)]
        ),
    ),
    (
        "study",
        _deep("study.toml", DEEP_TOML, lambda t, p: ["study", "latent-probe", str(p), "--out", str(t / "o")]),
    ),
    ("demo-vectors", _deep("vectors/v.json", DEEP_JSON, lambda t, p: ["demo", "--vectors", str(p.parent)])),
]


@pytest.mark.parametrize("build", [b for _, b in DEEP], ids=[n for n, _ in DEEP])
def test_deep_nesting_is_refused_by_every_reader(
    build: Build, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv, named = build(tmp_path)
    assert main(list(argv)) == 2
    out, err = capsys.readouterr()
    assert "Traceback" not in err + out and "RecursionError" not in err + out
    assert named in err and "nested deeper than 64 levels" in err
    assert len(err.strip().splitlines()) == 1, err


# ---- the safety net in remnant.cli.main ----


def _raising(exc: BaseException) -> Callable[[Any], int]:
    def handler(args: Any) -> int:
        raise exc

    return handler


@pytest.mark.parametrize(
    "exc",
    [
        PermissionError(13, "Permission denied", "/data/run/records.jsonl"),
        IsADirectoryError(21, "Is a directory", "/data/run/records.jsonl"),
        NotADirectoryError(20, "Not a directory", "/data/run/records.jsonl"),
        FileNotFoundError(2, "No such file or directory", "/data/run/records.jsonl"),
        FileExistsError(17, "File exists", "/data/run/records.jsonl"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_an_oserror_about_a_path_is_one_line(
    exc: OSError, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _patch_verdict_handler(monkeypatch, _raising(exc))
    assert main(["verdict", "facts.json"]) == 2
    err = capsys.readouterr().err
    assert err == f"remnant verdict: error: /data/run/records.jsonl: {exc.strerror}\n"


def _patch_verdict_handler(monkeypatch: pytest.MonkeyPatch, handler: Callable[[Any], int]) -> None:
    """Make ``remnant verdict``'s handler ``handler`` by wrapping the parser's set_defaults."""
    import argparse

    original = argparse.ArgumentParser.set_defaults

    def set_defaults(self: argparse.ArgumentParser, **kwargs: Any) -> None:
        if self.prog.endswith(" verdict") and "handler" in kwargs:
            kwargs["handler"] = handler
        original(self, **kwargs)

    monkeypatch.setattr(argparse.ArgumentParser, "set_defaults", set_defaults)


@pytest.mark.parametrize("exc", [RuntimeError("a bug"), OSError(5, "Input/output error"), KeyError("x")])
def test_a_bug_keeps_its_traceback(exc: Exception, monkeypatch: pytest.MonkeyPatch) -> None:
    _patch_verdict_handler(monkeypatch, _raising(exc))
    with pytest.raises(type(exc)):
        main(["verdict", "facts.json"])


def test_a_real_oserror_from_a_command_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """keys generate into a folder whose remnant.key is a folder: the writer's IsADirectoryError, caught."""
    (tmp_path / "keys" / "remnant.key").mkdir(parents=True)
    assert main(["keys", "generate", "--out", str(tmp_path / "keys")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "remnant.key" in err and len(err.strip().splitlines()) == 1


# ---- a reader that stops early ----


def _piped(command: str, reader: str) -> tuple[int, str]:
    """Run ``remnant COMMAND | READER`` in bash; the remnant exit code and its stderr."""
    script = f'"{REMNANT}" {command} 2>"$ERR" | {reader} >/dev/null; echo "${{PIPESTATUS[0]}}"'
    err_file = Path(os.environ.get("TMPDIR", "/tmp")) / f"remnant-pipe-{os.getpid()}.err"
    # stdout block-buffered, as for most users (PYTHONUNBUFFERED would write each print at once)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"} | {"ERR": str(err_file)}
    try:
        done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env)
        return int(done.stdout.strip()), err_file.read_text(encoding="utf-8")
    finally:
        err_file.unlink(missing_ok=True)


@pytest.mark.skipif(
    not REMNANT.is_file() or shutil.which("bash") is None, reason="needs the installed script"
)
@pytest.mark.parametrize("command", ["schema statement", "--version"])
def test_output_closed_before_it_is_written(command: str) -> None:
    """``head -n 0`` exits before remnant writes: the write (schema) or the last flush (a short version line)
    fails; remnant says so in one line and exits 2."""
    code, err = _piped(command, "head -n 0")
    assert code == 2, err
    assert err == "remnant: error: the output was closed before all of it was written (broken pipe)\n"


@pytest.mark.skipif(
    not REMNANT.is_file() or shutil.which("bash") is None, reason="needs the installed script"
)
@pytest.mark.parametrize("command", ["schema statement", "--help"])
def test_head_never_shows_a_traceback(command: str) -> None:
    """``| head -1`` closes the pipe at a moment that varies run to run (written all, or cut short): either
    way, no traceback and no "Exception ignored" (``--help`` ends in argparse's SystemExit, flushed inside)."""
    code, err = _piped(command, "head -1")
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert (code, err) in {
        (0, ""),
        (2, "remnant: error: the output was closed before all of it was written (broken pipe)\n"),
    }
