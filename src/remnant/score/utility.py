"""Utility u: declared metrics (kind ``utility``), two scales kept apart (R9–R12).

Registered metrics:

- ``retain_kappa``: κ by greedy generation on the pack's retain items (the model still knows what it should);
- ``general_qa_kappa``: κ on the general questions the never-modified control answers — the binding's kept set
  (``remnant.packs.bind``, R10), so a perfect model scores 1;
- ``perplexity``: inverse perplexity on declared texts, admitted only where the deployment is itself language
  modelling (R9: ``deployment_is_lm=True`` must be declared, or the metric refuses to run).

Every metric is measured on the control, the pre-removal and the post-removal model under identical conditions
(R10) by :class:`remnant.engine.utility.UtilityMeasurement`; the two scales (removal stage R11, attack stage R12,
R13) are computed from its records by :func:`remnant.standard.derive.utility_stages`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from remnant.errors import ConfigError
from remnant.registry import register
from remnant.score.probe import Probe
from remnant.score.rates import Rate


@dataclass(frozen=True)
class UtilityReading:
    """One metric on one state: its value (higher is better), and its Rate where it is a proportion (R19)."""

    metric: str
    state: str
    value: float
    n: int
    rate: Rate | None = None


class UtilityMetric:
    """Base of declared utility metrics: ``measure(model, tokenizer, fmt, data, state=...)``."""

    name = ""
    version = "1"
    spec: Any = None

    def measure(
        self, model: Any, tokenizer: Any, fmt: Any, data: Sequence[Any], *, state: str
    ) -> UtilityReading:
        raise NotImplementedError


class _KappaMetric(UtilityMetric):
    def __init__(self, max_new_tokens: int = 32, batch_size: int = 16) -> None:
        self.max_new_tokens = max_new_tokens
        self.batch_size = batch_size

    def select(self, data: Sequence[Probe]) -> list[Probe]:
        return list(data)

    def measure(
        self, model: Any, tokenizer: Any, fmt: Any, data: Sequence[Any], *, state: str
    ) -> UtilityReading:
        from remnant.score.kappa import kappa_generated, kappa_rate

        probes = self.select(data)
        if not probes:
            raise ConfigError(f"utility {self.name}: no items to measure on")
        hits, _, _ = kappa_generated(
            model, tokenizer, fmt, probes, max_new_tokens=self.max_new_tokens, batch_size=self.batch_size
        )
        rate = kappa_rate(hits, probes)
        return UtilityReading(self.name, state, rate.net, rate.n, rate)


@register("utility", "retain_kappa", "1")
class RetainKappa(_KappaMetric):
    """κ on the retain items (greedy generation, normalised match)."""

    name = "retain_kappa"


@register("utility", "general_qa_kappa", "1")
class GeneralQAKappa(_KappaMetric):
    """κ on the general questions the control answers (the binding's kept set, R10)."""

    name = "general_qa_kappa"

    def __init__(
        self, kept_ids: tuple[str, ...] = (), max_new_tokens: int = 32, batch_size: int = 16
    ) -> None:
        super().__init__(max_new_tokens, batch_size)
        self.kept_ids = tuple(kept_ids)

    def select(self, data: Sequence[Probe]) -> list[Probe]:
        if not self.kept_ids:
            raise ConfigError(
                "utility general_qa_kappa needs kept_ids: the binding's general_utility_set (R10)"
            )
        keep = set(self.kept_ids)
        return [p for p in data if p.item_id in keep]


@register("utility", "perplexity", "1")
class Perplexity(UtilityMetric):
    """Inverse perplexity (1/ppl) on declared texts; only where the deployment is language modelling (R9)."""

    name = "perplexity"

    def __init__(self, deployment_is_lm: bool = False, max_length: int = 512) -> None:
        if not deployment_is_lm:
            raise ConfigError(
                "utility perplexity: R9 permits perplexity only where the deployment is itself language "
                "modelling; declare deployment_is_lm=True to use it"
            )
        self.deployment_is_lm = deployment_is_lm
        self.max_length = max_length

    def measure(
        self, model: Any, tokenizer: Any, fmt: Any, data: Sequence[Any], *, state: str
    ) -> UtilityReading:
        from remnant.models.prompts import EncodedPair
        from remnant.score.kappa import answer_loglikelihoods

        nll, count = 0.0, 0
        for text in data:  # one text per forward: texts of very different lengths pad poorly together
            ids = list(tokenizer(str(text))["input_ids"])[: self.max_length]
            if len(ids) < 2:
                continue
            # every token after the first is scored: the text's log-likelihood as an "answer" to its first token
            (logp,) = answer_loglikelihoods(model, [EncodedPair.of(ids[:1], ids[1:])])
            nll -= logp
            count += len(ids) - 1
        if count == 0:
            raise ConfigError("utility perplexity: no text of two or more tokens to measure on")
        return UtilityReading(self.name, state, math.exp(-nll / count), count)
