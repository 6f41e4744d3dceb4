"""The field's evaluation metrics with OpenUnlearning's definitions and names (docs/metrics.md), and
``remnant eval`` (:mod:`remnant.metrics.commands`).

Research measurements: none of them adjudicates a verdict under the Standard. Importing :mod:`remnant.metrics.handlers` registers
every metric handler as registry kind ``metric`` (name = OpenUnlearning's handler name, version "1"), so a log
names exactly what ran with every parameter (R23, R24). The handlers are numpy/scipy only; the model work
(:mod:`~remnant.metrics.forward`, :mod:`~remnant.metrics.generation`, :mod:`~remnant.metrics.gradnorm`) imports
torch when it runs.

Modules, one concept each:

- ``rows``: a TOFU evaluation row; ``encoding``: OpenUnlearning's and remnant's prompt formats; ``text``: decoding;
- ``forward``: the shared teacher-forced pass → ``scores.TokenScores``; ``generation``: greedy generations;
  ``gradnorm``: per-sample gradient norms;
- ``probability``, ``truth_ratio``, ``memorization`` (ES, EM), ``rouge``, ``mia`` (+ ``auc``), ``privacy``
  (forget quality, privleak), ``utility`` (model utility): the metrics, pure functions over the readings;
- ``evallog``: their log layout, written and read; ``catalogue``: the named TOFU and MUSE metrics; ``evaluate``:
  one run.
"""

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
