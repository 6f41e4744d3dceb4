"""The one output guard: every path a command writes is checked before any work, so nothing a user owns is lost.

A command that writes checks its output here first, so a long run never ends in an error about where its output
goes and nothing there is clobbered. Refused, each in one :class:`~remnant.errors.ConfigError` naming the path,
the reason and the requirement the output serves, with "nothing written" (exit 2):

- an existing file where a folder is expected (or a file above it), or a folder where a file is expected;
- an output that is one of the command's own inputs: the same file after resolving symbolic links, an output
  inside an input folder (``eval --out`` into its model or data folder), or an output folder that holds an input
  and would be replaced whole (``sweep export --out SW``, ``--out`` the pool's base model folder);
- a non-empty folder that remnant did not make for this purpose. Each output folder remnant makes carries a
  marker, :data:`MARKER_FILE`, naming its kind (:data:`KINDS`: a run folder, a sweep folder, a pack...); a folder
  with the marker of the command's kind is written again (a run resumed, an export replaced), one of another kind
  is not. A folder made before the marker existed counts as remnant's when it holds the files of its kind (a run
  folder's ``prereg.json`` or ``records.jsonl``...); an empty folder is anyone's;
- a folder replaced whole that is a symbolic link, the working folder or a folder above it (``--out .``);
- a run, sweep or other folder remnant writes into that holds a symbolic link at its top level: remnant never
  writes through a link out of the folder (R23; :mod:`remnant.atomic` refuses a link at every write as well).

A run folder handed to ``assess``, ``recompute`` or ``report`` must be a folder whose run files
(``records.jsonl``, ``prereg.json``, ...) are files where present, not folders. The command writes the marker with
:func:`mark_output` once its folder holds what it made.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from remnant.errors import ConfigError

#: The marker remnant writes into every output folder it makes (a dot file: data readers skip it).
MARKER_FILE = ".remnant-output.json"
#: Largest marker read back: a hostile one cannot make a check read gigabytes.
MARKER_BYTES = 4096

#: A command's inputs, each with the words a refusal names it by; None (an option not given) is skipped.
Inputs = Mapping[str, "str | Path | None"]


@dataclass(frozen=True)
class OutputKind:
    """What an output folder is for: ``what`` names it in messages; ``own_files`` are the files a folder of this
    kind held before the marker existed; ``replaced_whole`` folders are swapped for a new one, not written into."""

    name: str
    what: str
    own_files: tuple[str, ...] = ()
    replaced_whole: bool = False


#: Every kind of output folder remnant makes. The own files are the names remnant.prereg, remnant.records,
#: remnant.runlock, remnant.sweep.prepare, remnant.packs.schema and remnant.statement.keys write (a unit test
#: holds them to those modules' constants); a run folder's are :func:`run_files`.
KINDS: Mapping[str, OutputKind] = {
    kind.name: kind
    for kind in (
        OutputKind("run", "a run folder"),
        OutputKind("sweep", "a sweep folder", ("plan.json", "spec.toml", "records.jsonl", ".remnant.lock")),
        OutputKind(
            "study",
            "a study's output folder",
            (
                "prereg.json",
                "meta-eval.json",
                "recovery.json",
                "readmission.json",
                "readmission-cells.json",
                "goodhart.json",
                "summary.md",
                "latent-probe.json",
                "auditors.json",
            ),
        ),
        OutputKind("pack", "a pack folder", ("pack.json", "items.jsonl")),
        OutputKind("keys", "a key folder", ("remnant.key", "remnant.pub")),
        OutputKind("demo", "a demo folder", ("demo.json", "vectors.json")),
        OutputKind("eval", "an evaluation folder"),  # marked before its first write: no pre-marker folders
        OutputKind("states", "a folder of trained model states"),  # likewise
        OutputKind("model", "an exported model folder", replaced_whole=True),
        OutputKind("tofu", "a TOFU export folder", replaced_whole=True),
    )
}

KindName = Literal["run", "sweep", "study", "pack", "keys", "demo", "eval", "states", "model", "tofu"]


def run_files() -> dict[str, str]:
    """The files of a run folder (remnant.run_manifest), each with the requirement it serves."""
    from remnant.prereg import PREREG_FILE
    from remnant.records import DEVIATIONS_FILE, RECORDS_FILE
    from remnant.run_manifest import CONFIG_COPY, ENVELOPE_FILE, MANIFEST_FILE, STATEMENT_FILE

    return {
        PREREG_FILE: "R14",
        DEVIATIONS_FILE: "R15",
        CONFIG_COPY: "R24",
        RECORDS_FILE: "R23",
        MANIFEST_FILE: "R23",
        STATEMENT_FILE: "K4",
        ENVELOPE_FILE: "K5",
    }


def own_files(kind: KindName) -> tuple[str, ...]:
    """The files that make a folder without a marker count as remnant's ``kind`` (made before the marker)."""
    if kind == "run":
        from remnant.runlock import LOCK_FILE

        return (*run_files(), LOCK_FILE)
    return KINDS[kind].own_files


def _parents_are_folders(out: Path, option: str, requirement: str) -> None:
    """The nearest existing folder above ``out`` is a folder (a file there would make ``out`` unwritable)."""
    for parent in out.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ConfigError(
                    f"{option} {out}: {parent} is a file, not a folder", requirement=requirement
                )
            return


def _not_an_input(out: Path, inputs: Inputs, *, option: str, requirement: str, whole: bool) -> None:
    """``out`` is none of ``inputs``, lies inside none of the input folders and, when it is replaced ``whole``,
    holds none of them (compared after resolving symbolic links)."""
    where = out.resolve()
    for label, given in inputs.items():
        if given is None or not Path(given).exists():
            continue  # not given, or a name (a zoo model) rather than a path
        source = Path(given).resolve()
        if where == source:
            reason = f"is {label} ({given})"
        elif source.is_dir() and where.is_relative_to(source):
            reason = f"is inside {label} ({given})"
        elif whole and source.is_relative_to(where):
            reason = f"holds {label} ({given}), which replacing the folder would destroy"
        else:
            continue
        raise ConfigError(
            f"{option} {out}: {reason}, an input of this command; write the output elsewhere (nothing written)",
            requirement=requirement,
        )


def _marked_kind(folder: Path) -> str | None:
    """The kind the folder's marker names; None without a marker; ``"?"`` for one remnant cannot have written
    (a link, a folder, oversized or malformed)."""
    from pydantic import ValidationError

    from remnant.output_marker import OutputMarker

    marker = folder / MARKER_FILE
    if not marker.exists() and not marker.is_symlink():
        return None
    try:
        if marker.is_symlink() or not marker.is_file() or marker.stat().st_size > MARKER_BYTES:
            return "?"
        return OutputMarker.model_validate_json(marker.read_bytes()).kind
    except (OSError, ValidationError):
        return "?"


def _remnant_made(out: Path, kind: KindName, *, option: str, requirement: str, given: bool = False) -> None:
    """``out`` is absent, empty, or a folder remnant made as ``kind`` (its marker, or its kind's own files);
    ``given``: the folder is the command's input (``recompute RUN``), not a place it chose to write."""
    if not out.is_dir() or not any(out.iterdir()):
        return
    spec = KINDS[kind]
    marked = _marked_kind(out)
    if marked == kind:
        return
    if marked is None and any((out / name).exists() for name in own_files(kind)):
        return  # made before the marker existed
    if marked is None:
        why = f"is a folder of other files that remnant did not make as {spec.what} (no {MARKER_FILE})"
    elif marked in KINDS:
        why = f"was made by remnant as {KINDS[marked].what}, not {spec.what}"
    else:
        why = f"holds a {MARKER_FILE} remnant did not write"
    if given:
        advice = f"this command writes into {spec.what}: name one remnant made"
    else:
        action = "would replace it whole" if spec.replaced_whole else "writes into it"
        advice = f"this command {action}: name a new or empty folder"
    raise ConfigError(f"{option} {out}: {why}; {advice} (nothing written)", requirement=requirement)


def _no_links(folder: Path, what: str) -> None:
    """No entry at the top of ``folder`` is a symbolic link: a write there would leave the folder (R23)."""
    if not folder.is_dir():
        return
    for entry in sorted(folder.iterdir()):
        if entry.is_symlink():
            raise ConfigError(
                f"{entry}: is a symbolic link (to {os.readlink(entry)}) in {what} {folder}; remnant never "
                "writes through a link out of the folder (nothing written)",
                requirement="R23",
            )


def _not_working_folder(out: Path, *, option: str, requirement: str) -> None:
    """A folder replaced whole is not a link, nor the working folder or one above it (``--out .``)."""
    if out.is_symlink():
        raise ConfigError(
            f"{option} {out}: is a symbolic link; this command replaces its folder whole and never replaces a "
            "link: name the folder itself (nothing written)",
            requirement=requirement,
        )
    cwd = Path.cwd().resolve()
    if cwd.is_relative_to(out.resolve()):
        raise ConfigError(
            f"{option} {out}: is the working folder or holds it; this command replaces its folder whole: name a "
            "new folder (nothing written)",
            requirement=requirement,
        )


def out_folder(
    path: str | Path,
    *,
    requirement: str,
    kind: KindName,
    option: str = "--out",
    inputs: Inputs | None = None,
) -> Path:
    """``path`` as a folder to write as ``kind`` (module docstring): absent (made later), empty, or remnant's own
    of that kind, and none of the command's ``inputs``; ConfigError naming it otherwise."""
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise ConfigError(
            f"{option} {out}: exists and is not a folder; this command writes a folder there (nothing written)",
            requirement=requirement,
        )
    _parents_are_folders(out, option, requirement)
    spec = KINDS[kind]
    _not_an_input(out, inputs or {}, option=option, requirement=requirement, whole=spec.replaced_whole)
    if spec.replaced_whole:
        _not_working_folder(out, option=option, requirement=requirement)
    _remnant_made(out, kind, option=option, requirement=requirement)
    if not spec.replaced_whole:
        _no_links(out, spec.what)
    return out


def out_file(
    path: str | Path, *, requirement: str, option: str = "--out", inputs: Inputs | None = None
) -> Path:
    """``path`` as a file to write: absent or a regular file (not a link), none of the command's ``inputs`` and
    inside none of its input folders; ConfigError naming it otherwise."""
    out = Path(path)
    if out.exists() and not out.is_file():
        what = "a folder" if out.is_dir() else "not a regular file"
        raise ConfigError(
            f"{option} {out}: is {what}; this command writes a file there (nothing written)",
            requirement=requirement,
        )
    _parents_are_folders(out, option, requirement)
    _not_an_input(out, inputs or {}, option=option, requirement=requirement, whole=False)
    if out.is_symlink():
        raise ConfigError(
            f"{option} {out}: is a symbolic link (to {os.readlink(out)}); remnant never writes through a link: "
            "name the file itself (nothing written)",
            requirement=requirement,
        )
    return out


def run_folder(
    path: str | Path,
    *,
    requirement: str,
    must_exist: bool = True,
    option: str = "RUN",
    kind: KindName = "run",
) -> Path:
    """A run folder (or, with ``kind``, a sweep or study folder): a folder (absent only when ``must_exist`` is
    false) whose run files are files where present, that remnant made as ``kind`` (or is empty), and that holds
    no symbolic link at its top level (R23)."""
    run = Path(path)
    if not run.exists():
        if must_exist:
            raise ConfigError(f"{option} {run}: no such {KINDS[kind].what}", requirement=requirement)
        _parents_are_folders(run, option, requirement)
        return run
    if not run.is_dir():
        raise ConfigError(f"{option} {run}: is a file, not {KINDS[kind].what}", requirement=requirement)
    for name, needs in run_files().items():
        file = run / name
        if file.exists() and not file.is_file():
            raise ConfigError(f"{file}: is a folder, not the run's {name}", requirement=needs)
    _remnant_made(run, kind, option=option, requirement=requirement, given=must_exist)
    _no_links(run, KINDS[kind].what)
    return run


def mark_output(folder: str | Path, kind: KindName) -> Path:
    """Write remnant's marker of ``kind`` into ``folder`` (once; a folder replaced whole gets it inside the folder
    being built). Returns the marker's path."""
    from remnant import __version__
    from remnant.atomic import write_atomic
    from remnant.output_marker import OutputMarker

    out = Path(folder)
    marker = out / MARKER_FILE
    if _marked_kind(out) != kind:
        text = OutputMarker(kind=kind, version=__version__).model_dump_json() + "\n"
        write_atomic(marker, text)
    return marker


__all__ = [
    "KINDS",
    "MARKER_FILE",
    "Inputs",
    "KindName",
    "OutputKind",
    "mark_output",
    "out_file",
    "out_folder",
    "own_files",
    "run_files",
    "run_folder",
]
