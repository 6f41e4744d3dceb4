"""Paths named on the command line, checked before any work: ``--out`` folders and files, and run folders.

A command that writes into ``--out`` checks it first, so a long run never ends in an error about where its output
goes, and nothing there is clobbered: an existing file where a folder is expected (or a file above it), or an
existing folder where a file is expected, is a one-line :class:`~remnant.errors.ConfigError` naming the path
(exit 2). A run folder handed to ``assess``, ``recompute`` or ``report`` must be a folder whose run files
(``records.jsonl``, ``prereg.json``, ...) are files where present, not folders.

Each check takes the requirement the output serves, so the message cites it like every other refusal.
"""

from __future__ import annotations

from pathlib import Path

from remnant.errors import ConfigError


def run_files() -> dict[str, str]:
    """The files of a run folder (remnant.assess.runfiles), each with the requirement it serves."""
    from remnant.assess.runfiles import CONFIG_COPY
    from remnant.prereg import PREREG_FILE
    from remnant.records import DEVIATIONS_FILE, RECORDS_FILE
    from remnant.report.runs import ENVELOPE_FILE, STATEMENT_FILE
    from remnant.run_manifest import MANIFEST_FILE

    return {
        PREREG_FILE: "R14",
        DEVIATIONS_FILE: "R15",
        CONFIG_COPY: "R24",
        RECORDS_FILE: "R23",
        MANIFEST_FILE: "R23",
        STATEMENT_FILE: "K4",
        ENVELOPE_FILE: "K5",
    }


def _parents_are_folders(out: Path, option: str, requirement: str) -> None:
    """The nearest existing folder above ``out`` is a folder (a file there would make ``out`` unwritable)."""
    for parent in out.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ConfigError(
                    f"{option} {out}: {parent} is a file, not a folder", requirement=requirement
                )
            return


def out_folder(path: str | Path, *, requirement: str, option: str = "--out") -> Path:
    """``path`` as a folder to write into: absent (made later) or a folder; ConfigError naming it otherwise."""
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise ConfigError(
            f"{option} {out}: exists and is not a folder; this command writes a folder there (nothing written)",
            requirement=requirement,
        )
    _parents_are_folders(out, option, requirement)
    return out


def out_file(path: str | Path, *, requirement: str, option: str = "--out") -> Path:
    """``path`` as a file to write: absent or a regular file; ConfigError naming it when it is a folder."""
    out = Path(path)
    if out.exists() and not out.is_file():
        what = "a folder" if out.is_dir() else "not a regular file"
        raise ConfigError(
            f"{option} {out}: is {what}; this command writes a file there (nothing written)",
            requirement=requirement,
        )
    _parents_are_folders(out, option, requirement)
    return out


def run_folder(path: str | Path, *, requirement: str, must_exist: bool = True, option: str = "RUN") -> Path:
    """A run folder: a folder (absent only when ``must_exist`` is false) whose run files are files where present."""
    run = Path(path)
    if not run.exists():
        if must_exist:
            raise ConfigError(f"{option} {run}: no such run folder", requirement=requirement)
        _parents_are_folders(run, option, requirement)
        return run
    if not run.is_dir():
        raise ConfigError(f"{option} {run}: is a file, not a run folder", requirement=requirement)
    for name, needs in run_files().items():
        file = run / name
        if file.exists() and not file.is_file():
            raise ConfigError(f"{file}: is a folder, not the run's {name}", requirement=needs)
    return run


__all__ = ["out_file", "out_folder", "run_files", "run_folder"]
