"""A cell record's k/n against the observations written with it (R23), by the harness's own counting rule.

``count_items`` is the rule :func:`remnant.attacks.harness.cell` builds cells with; ``recompute`` re-derives each
recorded cell with it from the observations of the cell's batch (the lines appended with it, just before it).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from remnant.assess.recompute import batch_observations, check_cell_counts, count_problem
from remnant.records import AnyRecord, CellRecord, Event, Observation, RecordIntegrityError
from remnant.score.rates import count_items


def obs(item: str, kappa: bool | None = True, *, score: float | None = None, **kw: Any) -> Observation:
    base: dict[str, Any] = dict(
        run_id="r",
        cell_key="key",
        model_state="post_removal",
        attack="prefill",
        surface="inference_time",
        item_id=item,
        checkpoint="final",
        kappa=kappa,
        willing=True,
        score=score,
        seed=1,
    )
    base.update(kw)
    return Observation.model_validate(base)


def cell(k: int, n: int, metric: str = "kappa", **kw: Any) -> CellRecord:
    base: dict[str, Any] = dict(
        run_id="r",
        cell_key="key",
        attack="prefill",
        surface="inference_time",
        model_state="post_removal",
        metric=metric,
        k=k,
        n=n,
        checkpoint="final",
        elapsed_s=0.5,
    )
    base.update(kw)
    return CellRecord.model_validate(base)


def test_count_items_is_the_harness_rule() -> None:
    scored = count_items([True, False, True], [True, None, False])
    assert (scored.k, scored.n, scored.expected_k, scored.willing_k, scored.willing_n) == (2, 3, None, 1, 2)
    analytic = count_items([0.4, 0.35, 0.9], [None, None, None])
    assert (analytic.k, analytic.n, analytic.willing_n) == (2, 3, 0)  # round(1.65) = 2
    assert analytic.expected_k == pytest.approx(1.65)
    assert count_items([0.99, 0.99], []).k == 2 and count_items([1.0, 1.0, 0.7], []).k == 3  # capped at n


def test_a_cell_counts_only_the_observations_of_its_own_batch() -> None:
    """A cell re-run after a torn write leaves orphaned observations of the cut batch before the re-run."""
    orphan = obs("a", kappa=False)
    batch: list[AnyRecord] = [obs("a"), obs("b", kappa=False), obs("c"), cell(2, 3), cell(3, 3, metric="w")]
    records: list[AnyRecord] = [orphan, Event(run_id="r", stage="assess", kind="resumed", at="t"), *batch]
    assert [o.item_id for o in batch_observations(records, 5)] == ["a", "b", "c"]
    assert batch_observations(records, 6) == batch_observations(records, 5)  # the κ record is stepped over
    assert batch_observations(records, 0) == []  # not a cell record
    other_checkpoint: list[AnyRecord] = [
        obs("a", checkpoint="step=0"),
        obs("a", checkpoint="step=1"),
        cell(1, 1, checkpoint="step=1"),
    ]
    assert [o.checkpoint for o in batch_observations(other_checkpoint, 2)] == ["step=1"]
    check_cell_counts(records, Path("records.jsonl"))


@pytest.mark.parametrize(
    ("record", "observations", "message"),
    [
        (
            cell(3, 3),
            [obs("a"), obs("b", kappa=False), obs("c")],
            "k=3, n=3, but the 3 observations .* give k=2, n=3",
        ),
        (cell(2, 4), [obs("a"), obs("b", kappa=False), obs("c")], "give k=2, n=3"),
        (cell(1, 1, metric="w"), [obs("a", willing=None)], "give k=0, n=0"),
        (cell(2, 2), [], "the 0 observations written with it give k=0, n=0"),
        (
            cell(2, 3, expected_k=2.4),
            [obs("a", None, score=0.5), obs("b", None, score=0.5), obs("c", None, score=0.9)],
            "expected_k 2.4 is not the sum",
        ),
        (
            cell(3, 3, expected_k=1.9),
            [obs("a", None, score=0.5), obs("b", None, score=0.5), obs("c", None, score=0.9)],
            "give k=2, n=3",
        ),
        (cell(1, 1, status="failed", reason="boom"), [], "status failed yet k=1, n=1"),
        (
            cell(
                5,
                10,
                metric="utility",
                surface="utility",
                utility_metric="retain_kappa",
                proportion=True,
                value=0.6,
            ),
            [],
            "0.6 is not within",
        ),
        (
            cell(
                1,
                10,
                metric="utility",
                surface="utility",
                utility_metric="retain_kappa",
                proportion=False,
                value=3.2,
            ),
            [],
            "counts k = 0",
        ),
    ],
)
def test_counts_that_do_not_follow_from_the_observations(
    record: CellRecord, observations: list[Observation], message: str
) -> None:
    problem = count_problem(record, observations)
    assert problem is not None
    assert re.search(message, problem), problem


@pytest.mark.parametrize(
    ("record", "observations"),
    [
        (cell(2, 3), [obs("a"), obs("b", kappa=False), obs("c")]),
        (cell(2, 3, metric="w"), [obs("a"), obs("b", willing=False), obs("c"), obs("d", willing=None)]),
        (
            cell(2, 3, expected_k=1.9),
            [obs("a", None, score=0.5), obs("b", None, score=0.5), obs("c", None, score=0.9)],
        ),
        (cell(0, 0, status="not_applicable", reason="MCQ only"), []),
        (
            cell(
                5,
                10,
                metric="utility",
                surface="utility",
                utility_metric="retain_kappa",
                proportion=True,
                value=0.45,
            ),
            [],
        ),
        (
            cell(
                0,
                10,
                metric="utility",
                surface="utility",
                utility_metric="retain_kappa",
                proportion=False,
                value=3.2,
            ),
            [],
        ),
        (cell(4, 6, risk="linkability"), []),  # Class D: the battery's own rule, not re-derived
    ],
)
def test_counts_that_follow(record: CellRecord, observations: list[Observation]) -> None:
    assert count_problem(record, observations) is None


def test_the_check_names_the_line_and_the_cell() -> None:
    records: list[AnyRecord] = [
        obs("a"),
        obs("b"),
        cell(2, 2),
        obs("a", model_state="control"),
        cell(1, 2, model_state="control"),
    ]
    with pytest.raises(RecordIntegrityError) as info:
        check_cell_counts(records, Path("RUN/records.jsonl"))
    message = str(info.value)
    assert message.startswith("RUN/records.jsonl: line 5: cell prefill/control/kappa at final: k=1, n=2")
    assert message.endswith("(R23)")
