"""A run or sweep folder in use, and lock files planted in a folder: one line, exit 2, the folder named (R23).

Each case gives a command a folder that a real second process holds (remnant.runlock), or whose lock file a
claimant has planted: a symlink out of the folder (dangling or not), a hard link to a file elsewhere, a folder,
a FIFO, or a holder that names itself in control characters or not at all. The command must refuse before it
reads or writes anything: every file under the case's folder is byte-identical afterwards, and nothing is
created through a planted link.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
from harness import Hostile, check, ids

from lock_holders import Holder, start_holder
from remnant.runlock import LOCK_FILE

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "unit" / "sweep"))
from assess_fixtures import tiny_pack, write_config  # noqa: E402
from sweep_fixtures import tiny_spec, write_spec  # noqa: E402

Build = Callable[[Path], tuple[Sequence[str], str]]
#: The holders the running case started; stopped after each test.
HOLDERS: list[Holder] = []
RECORDS = b'{"entry_type":"event","prev":"0"}\n' * 3


@pytest.fixture(autouse=True)
def _stop_holders() -> Iterator[None]:
    yield
    while HOLDERS:
        HOLDERS.pop().stop()


def _config(tmp: Path) -> Path:
    return write_config(tmp / "c.toml", pack=tiny_pack(tmp / "pack"), control=tmp / "control")


def _run(tmp: Path) -> Path:
    """A pre-registered run folder holding records (whatever they say: the refusal comes before any read)."""
    from remnant.config import load_config
    from remnant.prereg import freeze

    run = tmp / "run"
    freeze(load_config(_config(tmp)), run)
    (run / "records.jsonl").write_bytes(RECORDS)
    return run


def _sweep(tmp: Path) -> tuple[Path, Path]:
    spec = write_spec(tmp, tiny_spec(tmp / "model", tmp / "store"))
    out = tmp / "out"
    out.mkdir()
    (out / "spec.toml").write_bytes(spec.read_bytes())
    (out / "records.jsonl").write_bytes(RECORDS)
    return spec, out


def _assess(tmp: Path, *extra: str) -> tuple[list[str], Path]:
    run = _run(tmp)
    return ["assess", str(tmp / "c.toml"), "--out", str(run), "--quiet", *extra], run


def _recompute(tmp: Path) -> tuple[list[str], Path]:
    run = _run(tmp)
    return ["recompute", str(run)], run


def _sweep_run(tmp: Path, *extra: str) -> tuple[list[str], Path]:
    spec, out = _sweep(tmp)
    return ["sweep", "run", str(spec), "--out", str(out), "--quiet", *extra], out


Command = Callable[[Path], tuple[list[str], Path]]
COMMANDS: dict[str, Command] = {
    "assess": _assess,
    "assess-resume": lambda t: _assess(t, "--resume"),
    "recompute": _recompute,
    "sweep-run": _sweep_run,
    "sweep-retry-failed": lambda t: _sweep_run(t, "--retry-failed"),
}


def _in_use(command: str, garbage: bytes = b"") -> Build:
    def build(tmp: Path) -> tuple[Sequence[str], str]:
        argv, folder = COMMANDS[command](tmp)
        HOLDERS.append(start_holder(folder, garbage=garbage))
        return argv, f"{folder}: in use by another remnant process"

    return build


def _planted(command: str, kind: str) -> Build:
    def build(tmp: Path) -> tuple[Sequence[str], str]:
        argv, folder = COMMANDS[command](tmp)
        lock, outside = folder / LOCK_FILE, tmp / "outside.txt"
        if kind != "dangling-symlink":
            outside.write_text("precious\n", encoding="utf-8")
        if kind in ("symlink", "dangling-symlink"):
            lock.symlink_to(outside)
        elif kind == "hardlink":
            os.link(outside, lock)
        elif kind == "folder":
            lock.mkdir()
        else:
            os.mkfifo(lock)
        return argv, str(lock)

    return build


FORGED = json.dumps({"pid": 7, "host": "h\n", "command": "\x1b[2J\nrm -rf /" * 40, "since": "\r"}).encode()

CASES: list[Hostile] = [
    *[Hostile(f"{name}-in-use", _in_use(name), "R23") for name in COMMANDS],
    Hostile("assess-holder-in-control-characters", _in_use("assess", garbage=FORGED), "R23"),
    Hostile("recompute-holder-not-json", _in_use("recompute", garbage=b"\x00\xff{"), "R23"),
    Hostile("assess-lock-symlink-out", _planted("assess-resume", "symlink"), "R23"),
    Hostile("recompute-lock-dangling-symlink", _planted("recompute", "dangling-symlink"), "R23"),
    Hostile("sweep-lock-symlink-out", _planted("sweep-run", "symlink"), "R23"),
    Hostile("sweep-lock-hardlink", _planted("sweep-run", "hardlink"), "R23"),
    Hostile("recompute-lock-hardlink", _planted("recompute", "hardlink"), "R23"),
    Hostile("assess-lock-a-folder", _planted("assess", "folder"), "R23"),
    Hostile("recompute-lock-a-fifo", _planted("recompute", "fifo"), "R23"),
]


def _files(tmp: Path) -> dict[Path, bytes | None]:
    """Every path under ``tmp`` (not following links), with the bytes of each regular file."""
    return {
        p: p.read_bytes() if p.is_file() and not p.is_symlink() else None
        for p in sorted(tmp.rglob("*"))
        if not p.name.startswith("holder-")
    }


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_a_folder_in_use_or_a_planted_lock_is_refused(
    case: Hostile, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    built: dict[Path, bytes | None] = {}

    def recorded(tmp: Path) -> tuple[Sequence[str], str]:
        argv, named = case.build(tmp)
        built.update(_files(tmp))
        return argv, named

    text = check(Hostile(case.id, recorded, case.requirement, case.exit_code), tmp_path, capsys)
    assert len(text.strip().splitlines()) == 1, text
    assert "\x1b" not in text and "\r" not in text
    if case.id.endswith("-in-use"):  # the holder named: the real second process
        assert f"(pid {HOLDERS[-1].pid} on " in text and "since " in text, text
    elif "holder" in case.id:  # a holder that forged its name, or gave none: shown safely, or not at all
        assert "(pid 7 on h?, " in text or "has not named itself" in text, text
    assert _files(tmp_path) == built  # nothing read-modified, nothing created through a planted link


def test_there_are_enough_cases() -> None:
    assert len(CASES) >= 12
