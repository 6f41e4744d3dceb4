"""The one output guard (remnant.cli_paths) and the no-link rule of every write (remnant.atomic), both branches of
each rule: an output that is an input; a non-empty folder remnant did not make for this output (the marker, a
marker of another kind, a forged marker, a run folder made before markers existed); a folder replaced whole that
is the working folder; a symbolic link at the top of a run folder, at a write's target or on its way (R23)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from remnant.atomic import append_durable, refuse_links, replace_dir, truncate_durable, write_atomic
from remnant.cli_paths import KINDS, MARKER_FILE, mark_output, out_file, out_folder, own_files, run_folder
from remnant.errors import ConfigError
from remnant.records import Event, RecordStore


def _folder(path: Path, *files: str) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for name in files or ("notes.txt",):
        (path / name).write_text("precious\n", encoding="utf-8")
    return path


# ---- a non-empty folder that remnant did not make ----


def test_an_absent_or_empty_folder_is_anyones(tmp_path: Path) -> None:
    assert out_folder(tmp_path / "new", requirement="R2", kind="pack") == tmp_path / "new"
    (tmp_path / "empty").mkdir()
    assert out_folder(tmp_path / "empty", requirement="R2", kind="pack") == tmp_path / "empty"
    assert not (tmp_path / "new").exists()  # the guard writes nothing


def test_a_folder_of_other_files_is_refused_and_one_remnant_made_is_not(tmp_path: Path) -> None:
    mine = _folder(tmp_path / "mine")
    with pytest.raises(ConfigError, match=r"did not make as a pack folder .*nothing written.*\(R2\)"):
        out_folder(mine, requirement="R2", kind="pack")
    mark_output(mine, "pack")
    assert out_folder(mine, requirement="R2", kind="pack") == mine
    marker = json.loads((mine / MARKER_FILE).read_text())
    assert marker == {"made_by": "remnant", "kind": "pack", "version": marker["version"]}


def test_a_folder_remnant_made_as_another_kind_is_refused(tmp_path: Path) -> None:
    run = _folder(tmp_path / "run")
    mark_output(run, "run")
    with pytest.raises(ConfigError, match="made by remnant as a run folder, not an exported model folder"):
        out_folder(run, requirement="R23", kind="model")
    assert out_folder(run, requirement="R14", kind="run") == run


@pytest.mark.parametrize(
    "marker",
    ['{"kind": "pack"}', "not json", '{"made_by": "remnant", "kind": "pack", "version": "0", "x": 1}'],
    ids=["missing-fields", "not-json", "extra-field"],
)
def test_a_marker_remnant_did_not_write_is_no_marker(tmp_path: Path, marker: str) -> None:
    mine = _folder(tmp_path / "mine")
    (mine / MARKER_FILE).write_text(marker, encoding="utf-8")
    with pytest.raises(ConfigError, match=f"holds a {MARKER_FILE} remnant did not write"):
        out_folder(mine, requirement="R2", kind="pack")


def test_a_marker_that_is_a_link_is_no_marker(tmp_path: Path) -> None:
    real = _folder(tmp_path / "real")
    mark_output(real, "pack")
    mine = _folder(tmp_path / "mine")
    os.symlink(real / MARKER_FILE, mine / MARKER_FILE)
    with pytest.raises(ConfigError, match="remnant did not write"):
        out_folder(mine, requirement="R2", kind="pack")


def test_a_run_folder_made_before_the_marker_is_remnants(tmp_path: Path) -> None:
    """prereg.json (or records.jsonl...) marks a run folder made before the marker; not a model folder."""
    run = _folder(tmp_path / "run", "prereg.json")
    assert run_folder(run, requirement="R14", must_exist=False, option="--out") == run
    assert out_folder(run, requirement="R14", kind="run") == run
    with pytest.raises(ConfigError, match="did not make as an exported model folder"):
        out_folder(run, requirement="R23", kind="model")
    with pytest.raises(ConfigError, match=r"did not make as a run folder.*name a new or empty folder"):
        run_folder(_folder(tmp_path / "mine"), requirement="R14", must_exist=False, option="--out")
    with pytest.raises(ConfigError, match=r"RUN .*mine: .*writes into a run folder: name one remnant made"):
        run_folder(tmp_path / "mine", requirement="R24")


def test_mark_output_writes_once(tmp_path: Path) -> None:
    marker = mark_output(tmp_path / "out", "sweep")
    first = marker.stat().st_mtime_ns, marker.stat().st_ino
    assert mark_output(tmp_path / "out", "sweep") == marker
    assert (marker.stat().st_mtime_ns, marker.stat().st_ino) == first


def test_the_own_files_are_the_names_the_writers_use() -> None:
    from remnant.packs.schema import ITEMS_FILE, MANIFEST_FILE
    from remnant.prereg import PREREG_FILE
    from remnant.records import RECORDS_FILE
    from remnant.results import SPEC_COPY
    from remnant.runlock import LOCK_FILE
    from remnant.statement.keys import PRIVATE_NAME, PUBLIC_NAME
    from remnant.sweep.prepare import PLAN_FILE

    assert set(own_files("sweep")) == {PLAN_FILE, SPEC_COPY, RECORDS_FILE, LOCK_FILE}
    assert set(own_files("pack")) == {MANIFEST_FILE, ITEMS_FILE}
    assert set(own_files("keys")) == {PRIVATE_NAME, PUBLIC_NAME}
    assert PREREG_FILE in own_files("run") and PREREG_FILE in own_files("study")
    assert RECORDS_FILE in own_files("run") and LOCK_FILE in own_files("run")
    assert {k for k, v in KINDS.items() if v.replaced_whole} == {"model", "tofu"}


# ---- an output that is one of the command's inputs ----


def test_an_output_folder_that_is_holds_or_lies_in_an_input_is_refused(tmp_path: Path) -> None:
    base = _folder(tmp_path / "base", "config.json")
    inputs = {"the base model folder": base}
    with pytest.raises(
        ConfigError, match=r"is the base model folder .*an input of this command.*nothing written"
    ):
        out_folder(base, requirement="R23", kind="model", inputs=inputs)
    with pytest.raises(ConfigError, match="is inside the base model folder"):
        out_folder(base / "exported", requirement="R23", kind="model", inputs=inputs)
    with pytest.raises(
        ConfigError, match="holds the base model folder .*which replacing the folder would destroy"
    ):
        out_folder(tmp_path, requirement="R23", kind="model", inputs=inputs)
    # the other branch: a folder beside the input, and an input not given or not a path (a zoo name)
    assert out_folder(tmp_path / "beside", requirement="R23", kind="model", inputs=inputs)
    assert out_folder(
        tmp_path / "x", requirement="R23", kind="model", inputs={"a": None, "b": "SmolLM2-135M"}
    )


def test_a_folder_written_into_may_hold_an_input(tmp_path: Path) -> None:
    """Only a folder replaced whole destroys what it holds; a study's folder beside its config is fine."""
    out = _folder(tmp_path / "study", "study.toml")
    mark_output(out, "study")
    assert out_folder(out, requirement="R14", kind="study", inputs={"the config": out / "study.toml"}) == out


def test_an_input_reached_through_a_link_is_still_the_input(tmp_path: Path) -> None:
    statement = tmp_path / "s.json"
    statement.write_text("{}", encoding="utf-8")
    os.symlink(statement, tmp_path / "alias.json")
    with pytest.raises(ConfigError, match=r"is the statement .*\(K5\)"):
        out_file(tmp_path / "alias.json", requirement="K5", inputs={"the statement": statement})
    assert out_file(tmp_path / "s.dsse.json", requirement="K5", inputs={"the statement": statement})


def test_an_output_file_inside_an_input_folder_is_refused(tmp_path: Path) -> None:
    data = _folder(tmp_path / "tofu", "forget10.json")
    with pytest.raises(ConfigError, match="is inside the --data folder"):
        out_file(data / "forget10.json", requirement="R23", inputs={"the --data folder": data})
    assert out_file(tmp_path / "eval.json", requirement="R23", inputs={"the --data folder": data})


def test_an_output_file_that_is_a_link_is_refused(tmp_path: Path) -> None:
    victim = _folder(tmp_path / "v", "victim.txt") / "victim.txt"
    os.symlink(victim, tmp_path / "out.html")
    with pytest.raises(ConfigError, match=r"out\.html: is a symbolic link .*nothing written"):
        out_file(tmp_path / "out.html", requirement="R22")


# ---- a folder replaced whole ----


@pytest.mark.parametrize("out", [".", "..", "../.."])
def test_a_folder_replaced_whole_is_not_the_working_folder(
    out: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cwd = tmp_path / "a" / "b"
    cwd.mkdir(parents=True)
    monkeypatch.chdir(cwd)
    with pytest.raises(ConfigError, match=rf"--out {re.escape(out)}: is the working folder or holds it"):
        out_folder(out, requirement="R23", kind="model")
    assert out_folder("sub", requirement="R23", kind="model") == Path("sub")
    assert out_folder(".", requirement="R14", kind="run") == Path(".")  # written into, not replaced


def test_a_folder_replaced_whole_is_not_a_link(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    os.symlink(real, tmp_path / "alias")
    with pytest.raises(
        ConfigError, match="alias: is a symbolic link; this command replaces its folder whole"
    ):
        out_folder(tmp_path / "alias", requirement="R23", kind="model")


# ---- links at the top of a folder remnant writes into ----


def test_a_link_at_the_top_of_a_run_folder_is_refused(tmp_path: Path) -> None:
    run = _folder(tmp_path / "run", "prereg.json")
    assert run_folder(run, requirement="R24") == run
    os.symlink(tmp_path / "elsewhere", run / "records.jsonl.torn")
    with pytest.raises(
        ConfigError, match=r"records\.jsonl\.torn: is a symbolic link .*out of the folder.*\(R23\)"
    ):
        run_folder(run, requirement="R24")
    with pytest.raises(ConfigError, match="is a symbolic link"):
        out_folder(run, requirement="R14", kind="run")


# ---- remnant.atomic: no write through a link ----


def test_write_atomic_refuses_a_link_and_leaves_its_target(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("mine\n", encoding="utf-8")
    os.symlink(victim, tmp_path / "statement.json")
    with pytest.raises(ConfigError, match=r"statement\.json: is a symbolic link"):
        write_atomic(tmp_path / "statement.json", "{}")
    assert victim.read_text() == "mine\n" and (tmp_path / "statement.json").is_symlink()
    assert write_atomic(tmp_path / "plain.json", "{}").read_text() == "{}"


def test_write_atomic_with_a_root_refuses_a_link_on_the_way(tmp_path: Path) -> None:
    run, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    run.mkdir()
    elsewhere.mkdir()
    os.symlink(elsewhere, run / "runs")
    with pytest.raises(ConfigError, match=r"run/runs: is a symbolic link"):
        write_atomic(run / "runs" / "run-1.json", "{}", root=run)
    assert not any(elsewhere.iterdir())
    with pytest.raises(ConfigError, match="is outside"):
        write_atomic(tmp_path / "x.json", "{}", root=run)
    assert write_atomic(run / "sub" / "ok.json", "{}", root=run).is_file()
    assert refuse_links(run / "sub" / "ok.json", run) == run / "sub" / "ok.json"


def test_replace_dir_refuses_a_link_and_reads_dot_as_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = _folder(tmp_path / "real")
    os.symlink(real, tmp_path / "alias")
    with pytest.raises(ConfigError, match="alias: is a symbolic link"):
        replace_dir(tmp_path / "alias", lambda tmp: None)
    assert (real / "notes.txt").read_text() == "precious\n"
    monkeypatch.chdir(tmp_path)

    def build(tmp: Path) -> None:
        (tmp / "f").write_text("x")

    assert replace_dir("made", build) == Path("made")
    assert (tmp_path / "made" / "f").read_text() == "x"


def test_append_and_truncate_refuse_a_link(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"mine\n")
    os.symlink(victim, tmp_path / "side")
    with pytest.raises(ConfigError, match="side: is a symbolic link"):
        append_durable(tmp_path / "side", b"torn\n")
    with pytest.raises(ConfigError, match="side: is a symbolic link"):
        truncate_durable(tmp_path / "side", 0)
    assert victim.read_bytes() == b"mine\n"
    append_durable(tmp_path / "log", b"a\n")
    append_durable(tmp_path / "log", b"b\n")
    truncate_durable(tmp_path / "log", 2)
    assert (tmp_path / "log").read_bytes() == b"a\n"


def test_a_torn_tail_is_never_moved_through_a_link(tmp_path: Path) -> None:
    """RecordStore.repair appended the torn bytes to ``records.jsonl.torn`` wherever it pointed."""
    store = RecordStore(tmp_path / "records.jsonl")
    store.append(Event(run_id="run-1", stage="assess", kind="stage_started"))
    with store.path.open("ab") as handle:
        handle.write(b'{"torn')
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"mine\n")
    os.symlink(victim, store.side_file)
    records = store.path.read_bytes()
    with pytest.raises(ConfigError, match=r"records\.jsonl\.torn: is a symbolic link.*\(R23\)"):
        store.repair()
    assert victim.read_bytes() == b"mine\n" and store.path.read_bytes() == records
    store.side_file.unlink()
    assert (
        store.repair() is not None and len(store.read()) == 1
    )  # the other branch: repaired beside the store
