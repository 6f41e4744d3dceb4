"""The field's evaluation metrics with OpenUnlearning's definitions and names (docs/metrics.md), and ``remnant eval``
(:mod:`remnant.metrics.commands`). Research measurements: none of them adjudicates a verdict under the Standard.

Importing :mod:`remnant.metrics.handlers` registers every metric handler as registry kind ``metric`` (name =
OpenUnlearning's handler name, version "1"), so a log names exactly what ran with every parameter (R23, R24)."""

from typing import TYPE_CHECKING

from remnant.lazy import lazy_exports

if TYPE_CHECKING:
    from remnant.metrics.catalogue import DEFAULT_MUSE, DEFAULT_TOFU, MUSE_METRICS, TOFU_METRICS
    from remnant.metrics.evallog import MetricLog, read_eval_log
    from remnant.metrics.rows import QARow

#: Imported on first use, so ``remnant eval --help`` loads neither numpy nor scipy (a light start); the handlers
#: register when the registry first asks for kind ``metric`` (:mod:`remnant.metrics.handlers`).
__getattr__ = lazy_exports(
    __name__,
    {
        "DEFAULT_MUSE": "catalogue",
        "DEFAULT_TOFU": "catalogue",
        "MUSE_METRICS": "catalogue",
        "TOFU_METRICS": "catalogue",
        "MetricLog": "evallog",
        "read_eval_log": "evallog",
        "QARow": "rows",
    },
)

__all__ = [
    "DEFAULT_MUSE",
    "DEFAULT_TOFU",
    "MUSE_METRICS",
    "TOFU_METRICS",
    "MetricLog",
    "QARow",
    "read_eval_log",
]
