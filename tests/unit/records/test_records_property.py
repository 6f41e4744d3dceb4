"""Property: any sequence of records written to the store reads back equal, in order (hypothesis)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from remnant.records import CellRecord, Deviation, Event, Observation, RecordStore

text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20)
name = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True)
finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
json_leaf = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | finite | text
json_value: Any = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)

observations = st.builds(
    Observation,
    run_id=text,
    cell_key=text,
    model_state=name,
    attack=text,
    surface=text,
    item_id=text,
    checkpoint=text,
    kappa=st.none() | st.booleans(),
    willing=st.none() | st.booleans(),
    score=st.none() | finite,
    output_excerpt=text,
    seed=st.integers(0, 2**53),
)


@st.composite
def cells(draw: st.DrawFn) -> CellRecord:
    n = draw(st.integers(1, 10_000))
    return CellRecord(
        run_id=draw(text),
        cell_key=draw(text),
        attack=draw(text),
        surface=draw(text),
        model_state=draw(name),
        metric=draw(text),
        k=draw(st.integers(0, n)),
        n=n,
        checkpoint=draw(text),
        params=draw(st.dictionaries(text, json_value, max_size=3)),
        elapsed_s=draw(st.floats(0, 1e6)),
    )


events = st.builds(
    Event,
    run_id=text,
    stage=text,
    kind=st.sampled_from(["stage_started", "stage_finished", "diverged", "deviation", "resumed", "note"]),
    message=text,
    at=text,
    data=st.dictionaries(text, json_value, max_size=3),
)
deviations = st.builds(
    Deviation,
    field=text.filter(bool),
    old=json_value,
    new=json_value,
    reason=text.filter(bool),
    stage=text.filter(bool),
    recorded_at=text,
)
records = st.lists(observations | cells() | events | deviations, max_size=12)


@settings(max_examples=60, deadline=None)
@given(batches=st.lists(records, max_size=4))
def test_any_record_sequence_round_trips(batches: list[list[Any]]) -> None:
    # fsync is about durability, not content; skipping it keeps 60 examples fast on a busy disk.
    with tempfile.TemporaryDirectory() as tmp, mock.patch("remnant.records.os.fsync"):
        store = RecordStore(Path(tmp) / "records.jsonl")
        for batch in batches:
            store.extend(batch)
        expected = [r for batch in batches for r in batch]
        assert store.read() == expected
        again = RecordStore(Path(tmp) / "copy.jsonl")
        for batch in batches:
            again.extend(batch)
        assert again.path.read_bytes() == store.path.read_bytes() if expected else True
