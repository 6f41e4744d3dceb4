"""Utility measurements: a registered utility metric on one state (R10, R11) or a relearned copy of it (R12, C-W4).

Utility is measured on every state under identical conditions at the removal stage; the post-removal model's is
compared with the pre-removal model's (R11, φ), never the attack-stage value (R13). A reading that is a proportion
is recorded as its k/n; any other value (perplexity, a rate net of chance) with a nominal n and k = 0. The record
names the metric (``utility_metric``) and carries its ``value`` and whether it is a ``proportion`` (so recompute
checks only its shape); a relearned copy's reading carries the relearning ``budget`` too (R12, C-W4).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

from remnant.engine.cell import CellFields, CellTarget, cell_record
from remnant.engine.measurement import Measurement, Record, State, component_spec, loaded
from remnant.records import CellRecord

# the checkpoint of a removal-stage utility measurement (R11), as the Standard's reading rules name it
from remnant.standard.derive import REMOVAL_STAGE

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from remnant.models.prompts import PromptFormat
    from remnant.score.utility import UtilityMetric


def item_identity(item: object) -> str | list[str]:
    """What identifies one item a metric reads: its pack id, else its question and answer text."""
    item_id = getattr(item, "item_id", None) or getattr(item, "id", None)
    if item_id is not None:
        return str(item_id)
    return [str(getattr(item, "question", item)), str(getattr(item, "answer", ""))]


class UtilityMeasurement(Measurement):
    """One utility metric on a state at the removal stage (R10, R11)."""

    kind: ClassVar[str] = "utility"

    def __init__(
        self,
        metric_name: str,
        metric: UtilityMetric,
        fmt: PromptFormat | None,
        data: Sequence[object],
        inputs: Mapping[str, object],
        *,
        attack: str = "none",
        checkpoint: str = REMOVAL_STAGE,
        roles: tuple[str, ...] = ("control", "pre_removal", "post_removal"),
    ) -> None:
        self.metric_name = metric_name
        self.metric = metric
        self.fmt = fmt
        self.data = tuple(data)
        self.name = attack
        self.surface = "utility"
        self.checkpoint = checkpoint
        self._inputs = dict(inputs)
        self._roles = roles

    @property
    def component(self) -> dict[str, object]:
        """The metric's registered name, version and parameters (R23), or its name alone."""
        return component_spec(self.metric) or {"name": self.metric_name}

    def roles(self) -> tuple[str, ...]:
        return self._roles

    def key_inputs(self) -> dict[str, object]:
        items = [item_identity(d) for d in self.data]
        return {
            "metric": self.component,
            "attack": self.name,
            "checkpoint": self.checkpoint,
            "items": items,
            **self._inputs,
        }

    def label(self, role: str) -> str:
        return f"utility {self.metric_name} on {role}"

    def measure(self, state: State | None, target: CellTarget) -> list[Record]:
        state = loaded(state, self)
        return [self.read(state.model, state, target)]

    def read(
        self,
        model: PreTrainedModel,
        state: State,
        target: CellTarget,
        checkpoint: str | None = None,
        budget: int | None = None,
    ) -> CellRecord:
        """The reading of ``model`` (the state's own, or a copy of it relearned at ``budget``) as a cell record
        (R10, R11): a proportion's k/n, else the value with a nominal n; ``budget`` for the reading of a copy
        relearned at that budget (R12)."""
        start = time.perf_counter()
        reading = self.metric.measure(model, state.tokenizer, self.fmt, self.data, state=state.role)
        rate = reading.rate
        k, n = (rate.k, rate.n) if rate is not None else (0, max(reading.n, 1))
        fields: CellFields = {
            "utility_metric": self.metric_name,
            "value": reading.value,
            "proportion": rate is not None,
            "component": self.component,
        }
        if budget is not None:
            fields["budget"] = budget
        return cell_record(
            target,
            metric="utility",
            k=k,
            n=n,
            checkpoint=checkpoint or self.checkpoint,
            fields=fields,
            elapsed=time.perf_counter() - start,
        )


__all__ = ["UtilityMeasurement", "item_identity"]
