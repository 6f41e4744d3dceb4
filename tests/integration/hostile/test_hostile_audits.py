"""Hostile ``[audits.*]`` tables given to ``remnant preregister CONFIG --out RUN`` (C-H7, R23).

Each case appends one audit table to the tiny valid config (``tests/integration/assess_fixtures.py``) and breaks
one thing: an audit of another family, a parameter out of range, one the audit does not take or of the wrong
type, a reference or control states the config cannot build, an unknown table. Every one is bad input (exit 2)
naming the config file and the requirement, refused before anything is frozen: an audit never fails after the
install and the removal have been paid for.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from harness import Hostile, check, ids

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from assess_fixtures import tiny_pack, write_config  # noqa: E402

_PACK: list[Path] = []


def _appended(table: str, **replace: str) -> Callable[[Path], tuple[list[str], str]]:
    """The tiny config (each ``replace`` key's text swapped for its value) with ``table`` appended."""

    def build(tmp: Path) -> tuple[list[str], str]:
        if not _PACK or not (_PACK[0] / "pack.json").is_file():
            _PACK[:] = [tiny_pack(tmp / "pack")]
        config = write_config(
            tmp / "config.toml", pack=_PACK[0], control=tmp / "models" / "control", **replace
        )
        config.write_text(config.read_text() + table)
        return ["preregister", str(config), "--out", str(tmp / "run")], str(config)

    return build


GRAD_ASCENT = 'method = "grad_ascent"\nparams = { lr = 1e-4, epochs = 1, batch_size = 16, grad_accum = 1, warmup_epochs = 0.0 }'

CASES: list[Hostile] = [
    Hostile("uds-runs-j-access", _appended('\n[audits.uds]\nimplementation = "j_access"\n'), "C-H7"),
    Hostile("uds-tau-negative", _appended("\n[audits.uds]\nparams = { tau = -1.0 }\n"), "R23"),
    Hostile("jaccess-k-zero", _appended("\n[audits.jaccess]\nparams = { k = 0 }\n"), "R23"),
    Hostile("jaccess-alpha-nan", _appended("\n[audits.jaccess]\nparams = { alpha = nan }\n"), "R23"),
    Hostile(  # the registered audit refuses a name it does not take, at preregister, naming the table
        "uds-unknown-param", _appended("\n[audits.uds]\nparams = { tua = 0.1 }\n"), "C-H7"
    ),
    Hostile(  # a string where a parameter of known meaning takes a count: refused when the config is read
        "direction-resamples-string",
        _appended('\n[audits.direction]\nparams = { n_resamples = "many" }\n'),
        "R23",
    ),
    Hostile(  # a string where the audit takes a list of blocks: refused by the audit's own type, at preregister
        "uds-layers-string", _appended('\n[audits.uds]\nparams = { layers = "all" }\n'), "C-H7"
    ),
    Hostile(
        "jaccess-decoder-unknown",
        _appended('\n[audits.jaccess]\nparams = { decoder = "mine" }\n'),
        "C-H7",
    ),
    Hostile(
        "controls-without-a-removal-method",
        _appended("\n[audits.uds]\ncontrols = true\n", **{GRAD_ASCENT: 'folder = "models/post"'}),
        "C-H7",
    ),
    Hostile("unknown-audit-table", _appended("\n[audits.probe]\nenabled = true\n"), "C-H6"),
]


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_hostile_audit_table_is_refused_before_anything_is_frozen(
    case: Hostile, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    check(case, tmp_path, capsys)
    assert not (tmp_path / "run" / "prereg.json").exists()
