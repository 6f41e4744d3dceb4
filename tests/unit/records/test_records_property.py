"""Property: any sequence of records written to the store reads back equal, in order (hypothesis); a cell record
of any kind written at schema_version 2 reads back as the same schema_version 3 record."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any
from unittest import mock

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from remnant.records import (
    CELL_DETAIL_FIELDS,
    CellRecord,
    Deviation,
    Event,
    Observation,
    RecordStore,
    upgrade,
)
from remnant.standard.derive import checkpoint_label
from remnant.standard.vocabulary import CLASS_D_RISKS

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "integration"))
from records_fixtures import cell_as_v2  # noqa: E402

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


spec = st.dictionaries(text, json_value, max_size=3)
maybe = st.none() | st.just(True)


@st.composite
def typed_fields(draw: st.DrawFn) -> dict[str, Any]:
    """The typed fields of one kind of cell remnant writes (with a surface, metric and checkpoint that fit)."""
    kind = draw(st.sampled_from(["attack", "relearning", "utility", "relearned_utility", "classd", "status"]))
    budget, step = draw(st.integers(1, 512)), draw(st.integers(0, 10_000))
    epoch = draw(st.floats(0, 100))
    at = {"budget": budget, "step": step, "epoch": epoch, "examples": round(epoch * budget)}
    out: dict[str, Any] = {"surface": draw(text), "metric": draw(st.sampled_from(["kappa", "w"]))}
    out["checkpoint"] = draw(text.filter(lambda t: not t.startswith("budget=")))
    if kind == "attack":
        out.update(component=draw(spec), expected_k=draw(st.none() | st.floats(0, 1e4)))
        out.update(adjudicating=draw(st.none() | st.just(False)))
    elif kind == "relearning":
        out.update(surface="relearning", checkpoint=checkpoint_label(budget, step), **at)
    elif kind in ("utility", "relearned_utility"):
        out.update(surface="utility", metric="utility", utility_metric=draw(name), component=draw(spec))
        out.update(value=draw(finite), proportion=draw(st.booleans()))
        if kind == "relearned_utility":
            out.update(checkpoint=checkpoint_label(budget, "final"), budget=budget)
    elif kind == "classd":
        out.update(risk=draw(st.sampled_from(CLASS_D_RISKS)), method=draw(name), component=draw(spec))
        out.update(entities=draw(st.sampled_from(["target", "control"])), baseline=draw(st.none() | finite))
        out.update(attack_component=draw(st.none() | spec), expected_k=draw(st.none() | st.floats(0, 1e4)))
        if draw(st.booleans()):
            out.update(surface="relearning", checkpoint=checkpoint_label(budget, step), **at)
            out.update(reused_step0=draw(st.booleans()))
    return out


@st.composite
def cells(draw: st.DrawFn) -> CellRecord:
    fields = draw(typed_fields())
    status = draw(st.sampled_from(["run", "run", "not_applicable", "failed", "diverged"]))
    n = draw(st.integers(1, 10_000)) if status == "run" else 0
    return CellRecord(
        run_id=draw(text),
        cell_key=draw(text),
        attack=draw(text),
        model_state=draw(name),
        k=draw(st.integers(0, n)),
        n=n,
        params=draw(
            st.dictionaries(text.filter(lambda t: t not in CELL_DETAIL_FIELDS), json_value, max_size=3)
        ),
        elapsed_s=draw(st.floats(0, 1e6)),
        status=status,
        reason=None if status == "run" else draw(text),
        **fields,
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


@settings(max_examples=150, deadline=None)
@given(cell=cells())
def test_a_v3_cell_written_as_v2_reads_back_the_same(cell: CellRecord) -> None:
    """v3 → the v2 form (its fields in params, a budget the label shows left to the label, as remnant wrote
    them) → upgraded on read: the same record, for every kind of cell."""
    line = cell.model_dump(mode="json")
    old = cell_as_v2(line)
    assert old["schema_version"] == 2 and not set(old) & set(CELL_DETAIL_FIELDS)
    assume(not set(cell.params) & {"attack", "metric"})  # keys v2 gave another meaning: never in a v2 line
    assert CellRecord.model_validate(upgrade(old)) == cell
    assert CellRecord.model_validate(upgrade({**old, "schema_version": 1})) == cell
