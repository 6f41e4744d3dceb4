"""Inputs the newer surfaces used to crash on or silently accept: each now ends in one line, the file (or option)
named, the field and the requirement cited, and exit 2 (1 for a signed envelope whose K5 check fails).

- a sweep spec's ``trainable`` regex that does not compile (install, relearning, a method's parameters) and the
  same in an assessment config's method parameters; an existing-pool ``glob`` that is absolute or empty (R14);
- ``--threads`` and ``--num-cpus`` below 1 (``--threads 0`` used to fall back to the spec's count silently; R24);
- a device this machine does not have, or that is no device, in ``remnant eval --device``, ``remnant models
  identify --device`` and an assessment config's ``[models] device`` (R24);
- study tables holding NaN, an infinity or a number that overflows to one, a metric column empty in every row,
  a Parquet table that disagrees with the CSV beside it, a pool whose every row failed (R23);
- ``remnant verify`` on a correctly signed in-toto statement of another predicate type (K5, exit 1);
- ``remnant eval`` on a TOFU or MUSE folder with an empty split (R2; it used to score 0.0).
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from harness import Hostile, check, ids

from remnant.results import FIXED_COLUMNS, write_csv_table

TESTS = Path(__file__).resolve().parents[2]
for folder in (TESTS / "integration", TESTS / "unit" / "sweep", TESTS / "unit" / "metrics"):
    sys.path.insert(0, str(folder))
from assess_fixtures import tiny_pack, write_config  # noqa: E402
from metrics_data import SPLITS, write_tofu_folder  # noqa: E402
from muse_data import MUSE, write_muse_folder  # noqa: E402
from sweep_fixtures import tiny_spec  # noqa: E402

Build = Callable[[Path], tuple[Sequence[str], str]]
#: No case loads a model: each input is refused before one would be read.
NO_MODEL = Path("/nonexistent/tiny")


# ---- sweep specs and assessment configs ----


def _spec(edit: Callable[[str], str], *extra: str) -> Build:
    """``sweep plan`` on the tiny spec after ``edit``; names the spec, or the option ``extra`` starts with."""

    def build(tmp: Path) -> tuple[Sequence[str], str]:
        path = tmp / "pool.toml"
        path.write_text(edit(tiny_spec(NO_MODEL, tmp / "store")), encoding="utf-8")
        return ["sweep", "plan", str(path), *extra], extra[0] if extra else str(path)

    return build


def _existing(glob: str) -> Build:
    def build(tmp: Path) -> tuple[Sequence[str], str]:
        path = tmp / "pool.toml"
        path.write_text(
            f'kind = "existing"\nname = "x"\n[pack]\npath = "pack"\n'
            f'[[models]]\nglob = "{glob}"\npool = "unlearned"\n',
            encoding="utf-8",
        )
        return ["sweep", "plan", str(path)], str(path)

    return build


def _run_with(option: str, value: str) -> Build:
    def build(tmp: Path) -> tuple[Sequence[str], str]:
        path = tmp / "pool.toml"
        path.write_text(tiny_spec(NO_MODEL, tmp / "store"), encoding="utf-8")
        return ["sweep", "run", str(path), "--out", str(tmp / "out"), option, value], option

    return build


def _config(tmp: Path, **replace: str) -> Path:
    pack = tiny_pack(tmp / "pack")
    extra: dict[str, Any] = dict(replace)  # config text replacements, never the key or post arguments
    path: Path = write_config(tmp / "c.toml", pack=pack, control=tmp / "control", **extra)
    return path


def _plan_config(**replace: str) -> Build:
    def build(tmp: Path) -> tuple[Sequence[str], str]:
        path = _config(tmp, **replace)
        return ["plan", str(path)], str(path)

    return build


def _assess_on_device(device: str) -> Build:
    """A pre-registered run whose config asks for ``device``: refused before any model is looked at."""

    def build(tmp: Path) -> tuple[Sequence[str], str]:
        from remnant.config import load_config
        from remnant.prereg import freeze

        path = _config(tmp, **{'device = "cpu"': f'device = "{device}"'})
        freeze(load_config(path), tmp / "run")
        return ["assess", str(path), "--out", str(tmp / "run")], str(path)

    return build


def _latent_trainable(tmp: Path) -> tuple[Sequence[str], str]:
    """The latent-probe study's config: named by its field (the study's config loader names no file yet)."""
    path = tmp / "study.toml"
    path.write_text(f'models = ["{NO_MODEL}"]\ntrainable = ["(?<"]\n', encoding="utf-8")
    return ["study", "latent-probe", str(path), "--out", str(tmp / "o")], "field 'trainable'"


# ---- remnant eval and models identify ----


def _eval(data: Callable[[Path], Path], *extra: str) -> Build:
    def build(tmp: Path) -> tuple[Sequence[str], str]:
        folder = data(tmp)
        argv = ["eval", str(NO_MODEL), "--data", str(folder), "--out", str(tmp / "o.json"), "--no-progress"]
        return [*argv, *extra], str(folder)

    return build


def _eval_device(device: str) -> Build:
    def build(tmp: Path) -> tuple[Sequence[str], str]:
        argv, _ = _eval(lambda t: write_tofu_folder(t / "tofu"))(tmp)
        return [*argv, "--device", device], "--device"

    return build


def _identify_device(tmp: Path) -> tuple[Sequence[str], str]:
    return ["models", "identify", str(NO_MODEL), "--device", "cuda:99"], "--device"


def _muse_without(split: str) -> Callable[[Path], Path]:
    return lambda tmp: write_muse_folder(tmp / "muse", {**MUSE, split: []})


def _tofu_without(split: str) -> Callable[[Path], Path]:
    return lambda tmp: write_tofu_folder(tmp / "tofu", {**SPLITS, split: []})


def _empty_split(data: Callable[[Path], Path], file: str, *extra: str) -> Build:
    def build(tmp: Path) -> tuple[Sequence[str], str]:
        argv, folder = _eval(data, *extra)(tmp)
        return argv, str(Path(folder) / file)

    return build


# ---- study tables ----


def _row(model: str, pool: str, status: str = "ok", **values: Any) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(FIXED_COLUMNS)
    row.update(model=model, pool=pool, perturbation="none", status=status, hyperparameters="{}")
    return {**row, **values}


def _rows(**change: Any) -> list[dict[str, Any]]:
    """Two target and two never-saw models with a ``kappa`` column; ``change`` applies to the first row."""
    rows = [
        _row("t0", "target", kappa=0.9),
        _row("t1", "target", kappa=0.8),
        _row("n0", "never_saw", kappa=0.1),
        _row("n1", "never_saw", kappa=0.2),
    ]
    rows[0].update(change)
    return rows


def _study(rows: list[dict[str, Any]], study: str = "meta-eval", parquet: Any = None) -> Build:
    def build(tmp: Path) -> tuple[Sequence[str], str]:
        folder = tmp / "sweep"
        folder.mkdir()
        columns = list(dict.fromkeys(k for r in rows for k in r))
        write_csv_table(folder / "results.csv", rows, columns)
        named = str(folder / "results.csv")
        if parquet is not None:
            pa = pytest.importorskip("pyarrow")
            pq = pytest.importorskip("pyarrow.parquet")
            pq.write_table(pa.Table.from_pylist(parquet), folder / "results.parquet")
        return ["study", study, str(folder), "--out", str(tmp / "o")], named

    return build


# ---- envelopes ----


def _foreign_predicate(field: str, value: str) -> Build:
    """An envelope correctly signed by the verifier's key over an in-toto statement whose ``field`` is ``value``."""

    def build(tmp: Path) -> tuple[Sequence[str], str]:
        from remnant.statement.canonical import canonical_json
        from remnant.statement.dsse import PAYLOAD_TYPE, intoto_statement, pae
        from remnant.statement.keys import generate_keypair, key_id, load_private_key

        private, public = generate_keypair(tmp / "keys")
        key = load_private_key(private)
        predicate = {"buildDefinition": {"buildType": "https://example.com/build"}, "verdict": "removed"}
        statement = intoto_statement(predicate, "provenance.json")
        statement[field] = value
        statement["subject"][0]["digest"]["sha256"] = hashlib.sha256(canonical_json(predicate)).hexdigest()
        payload = canonical_json(statement)
        envelope = {
            "payloadType": PAYLOAD_TYPE,
            "payload": base64.b64encode(payload).decode("ascii"),
            "signatures": [
                {
                    "keyid": key_id(key.public_key()),
                    "sig": base64.b64encode(key.sign(pae(PAYLOAD_TYPE, payload))).decode("ascii"),
                }
            ],
        }
        path = tmp / "provenance.dsse.json"
        path.write_text(json.dumps(envelope), encoding="utf-8")
        return ["verify", str(path), "--key", str(public)], str(path)

    return build


BAD_RE = "['model\\\\.layers\\\\.(']"

CASES: list[Hostile] = [
    # -- trainable regexes and globs (R14: declared before the run; R23 in the config's method parameters) --
    Hostile(
        "spec-install-trainable",
        _spec(lambda t: t.replace("batch_size = 8\n", f"batch_size = 8\ntrainable = {BAD_RE}\n", 1)),
        "R14",
    ),
    Hostile(
        "spec-relearn-trainable",
        _spec(lambda t: t.replace("enabled = false", "enabled = false\ntrainable = ['[a-']")),
        "R14",
    ),
    Hostile(
        "spec-method-trainable",
        _spec(lambda t: t.replace("warmup_epochs = 0.0 }", "warmup_epochs = 0.0, trainable = ['*'] }")),
        "R14",
    ),
    Hostile(
        "spec-common-trainable",
        _spec(lambda t: t.replace("seeds = [0]\n", "seeds = [0]\ncommon = { trainable = ['(?P<'] }\n", 1)),
        "R14",
    ),
    Hostile(
        "config-method-trainable",
        _plan_config(**{"warmup_epochs = 0.0 }": "warmup_epochs = 0.0, trainable = ['('] }"}),
        "R23",
    ),
    Hostile(
        "config-install-trainable",
        _plan_config(**{"batch_size = 16\n": "batch_size = 16\ntrainable = [')']\n"}),
        "R23",
    ),
    Hostile("latent-study-trainable", _latent_trainable, "C-H7"),
    Hostile("spec-glob-absolute", _existing("/tmp/checkpoints/npo_*"), "R14"),
    Hostile("spec-glob-empty", _existing(""), "R14"),
    # -- CPU thread counts (R24) --
    Hostile("plan-threads-negative", _spec(lambda t: t, "--threads", "-3"), "R24"),
    Hostile("plan-threads-zero", _spec(lambda t: t, "--threads", "0"), "R24"),
    Hostile("run-threads-zero", _run_with("--threads", "0"), "R24"),
    Hostile("run-num-cpus-negative", _run_with("--num-cpus", "-1"), "R24"),
    # -- devices (R24) --
    Hostile("eval-device-missing-gpu", _eval_device("cuda:99"), "R24"),
    Hostile("eval-device-not-a-device", _eval_device("gpu"), "R24"),
    Hostile("identify-device-missing-gpu", _identify_device, "R24"),
    Hostile("assess-config-device-missing-gpu", _assess_on_device("cuda:99"), "R24"),
    Hostile("config-device-not-a-device", _plan_config(**{'device = "cpu"': 'device = "gpu"'}), "R24"),
    # -- study tables (R23) --
    Hostile("study-nan", _study(_rows(kappa="nan")), "R23"),
    Hostile("study-inf", _study(_rows(kappa="-inf")), "R23"),
    Hostile("study-overflow", _study(_rows(kappa="1e309")), "R23"),
    Hostile("study-utility-nan", _study(_rows(utility="NaN")), "R23"),
    Hostile("study-blank-column", _study([{**r, "rouge": ""} for r in _rows()]), "R23"),
    Hostile("study-parquet-disagrees", _study(_rows(), parquet=_rows(kappa=0.95)), "R23"),
    Hostile(
        "study-every-target-failed",
        _study([{**r, "status": "failed"} if r["pool"] == "target" else r for r in _rows()]),
        "R23",
    ),
    Hostile(
        "study-recovery-every-unlearned-failed",
        _study([*_rows(), _row("u0", "unlearned", "diverged", kappa=0.4, parent="t0")], "recovery"),
        "R23",
    ),
    # -- envelopes (K5, exit 1: readable, signed, and not remnant's) --
    Hostile(
        "verify-foreign-predicate-type",
        _foreign_predicate("predicateType", "https://slsa.dev/provenance/v1"),
        "K5",
        1,
    ),
    Hostile(
        "verify-foreign-statement-type",
        _foreign_predicate("_type", "https://in-toto.io/Statement/v0.1"),
        "K5",
        1,
    ),
    # -- empty splits (R2) --
    Hostile(
        "eval-muse-empty-split",
        _empty_split(
            _muse_without("knowmem/forget_qa"), "knowmem/forget_qa.jsonl", "--metrics", "forget_knowmem_ROUGE"
        ),
        "R2",
    ),
    Hostile(
        "eval-muse-empty-icl-split",
        _empty_split(
            _muse_without("knowmem/forget_qa_icl"),
            "knowmem/forget_qa_icl.jsonl",
            "--metrics",
            "forget_knowmem_ROUGE",
        ),
        "R2",
    ),
    Hostile("eval-tofu-empty-split", _empty_split(_tofu_without("holdout10"), "holdout10.json"), "R2"),
]


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_refused_in_one_line(case: Hostile, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = check(case, tmp_path, capsys)
    assert len(text.strip().splitlines()) == 1, text
    assert not (tmp_path / "store" / "ckpt").exists() and not (tmp_path / "o.json").exists()


def test_there_are_enough_cases() -> None:
    assert len(CASES) >= 30
