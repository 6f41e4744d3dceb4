"""Fetching a zoo model: one conversion under a file lock across processes, and the GGUF conversion itself.

Nothing is downloaded: the lock test replaces the conversion with a slow stand-in in two real processes, and
the conversion test hands the real converter a tiny GGUF written from the tiny Llama.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from tamper import write_tiny_gguf

from remnant.models import load_model, zoo

_WORKER = textwrap.dedent(
    """
    import contextlib, sys, time
    from pathlib import Path

    from remnant.atomic import replace_dir
    from remnant.models import zoo

    home, ready, go, log, locked = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]), sys.argv[5]

    def slow_convert(entry, out_dir):
        with log.open("a") as f:
            f.write("converted\\n")
        time.sleep(1.0)  # long enough that an unlocked second process would also find the cache empty

        def build(tmp):
            (tmp / "config.json").write_text("{}")
            (tmp / "model.safetensors").write_bytes(b"")

        return replace_dir(out_dir, build)

    zoo.convert = slow_convert
    if locked != "locked":
        zoo.FileLock = lambda path: contextlib.nullcontext()
    zoo.ZOO["fake-zoo-model"] = zoo.ZOO["smollm2-135m-instruct"]
    ready.touch()
    while not go.exists():
        time.sleep(0.01)
    print(zoo.fetch("fake-zoo-model", home=home))
    """
)


def _race(tmp_path: Path, locked: str) -> tuple[list[subprocess.CompletedProcess[str]], int]:
    script = tmp_path / "worker.py"
    script.write_text(_WORKER)
    home, go, log = tmp_path / "home", tmp_path / "go", tmp_path / "conversions.log"
    procs = []
    for i in range(2):
        argv = [
            sys.executable,
            str(script),
            str(home),
            str(tmp_path / f"ready{i}"),
            str(go),
            str(log),
            locked,
        ]
        procs.append(subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    deadline = time.monotonic() + 120
    while not all((tmp_path / f"ready{i}").exists() for i in range(2)):
        assert time.monotonic() < deadline, "workers did not start"
        time.sleep(0.02)
    go.touch()
    done = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    conversions = len(log.read_text().splitlines()) if log.exists() else 0
    return done, conversions


def test_two_processes_fetching_one_model_convert_it_once(tmp_path: Path) -> None:
    done, conversions = _race(tmp_path, "locked")
    assert [p.returncode for p in done] == [0, 0], [p.stderr for p in done]
    folder = tmp_path / "home" / "models" / "fake-zoo-model"
    assert [p.stdout.strip() for p in done] == [str(folder), str(folder)]
    assert conversions == 1
    assert (folder / "config.json").is_file()


def test_without_the_lock_the_race_converts_twice(tmp_path: Path) -> None:
    """The control for the test above: the stand-in really races when nothing serialises it."""
    _done, conversions = _race(tmp_path, "unlocked")
    assert conversions == 2


def test_fetch_converts_a_gguf_into_a_loadable_safetensors_folder(
    tmp_path: Path, tiny_llama_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = write_tiny_gguf(tiny_llama_dir, tmp_path / "tiny.gguf")

    def extract(entry: zoo.ZooEntry, dest: Path) -> Path:
        out = dest / "gguf" / entry.gguf_name
        out.parent.mkdir(parents=True)
        out.write_bytes(source.read_bytes())
        return out

    entry = zoo.ZooEntry(wheels=(), gguf_name="tiny.gguf")
    monkeypatch.setitem(zoo.ZOO, "tiny-test", entry)
    monkeypatch.setattr(zoo, "extract_gguf", extract)
    folder = zoo.fetch("tiny-test", home=tmp_path / "home")
    assert zoo.cached("tiny-test", home=tmp_path / "home") == folder
    assert zoo.lock_path("tiny-test", tmp_path / "home").is_file()
    converted, original = load_model(folder), load_model(tiny_llama_dir)
    ids = torch.tensor([original.tokenizer("the quick brown fox")["input_ids"]])
    with torch.no_grad():
        assert torch.allclose(converted.model(ids).logits, original.model(ids).logits, atol=1e-5)
    monkeypatch.setattr(zoo, "convert", lambda entry, out: pytest.fail("converted twice"))
    assert zoo.fetch("tiny-test", home=tmp_path / "home") == folder
