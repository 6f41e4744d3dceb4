"""Pools of models: ``remnant sweep`` builds and measures tens to hundreds of checkpoints (docs/sweep.md).

A pool spec (:mod:`~remnant.sweep.spec`) declares the models — generated here (a base model, a pack, the install
recipe, the P- and N-pool references, a removal grid) or existing folders with labels — the measurement suite,
the perturbations (NF4, one-epoch relearning) and the resources a task needs. The driver
(:mod:`~remnant.sweep.driver`) resolves it (:mod:`~remnant.sweep.prepare`, :mod:`~remnant.sweep.pool`,
:mod:`~remnant.sweep.cells`), runs one task per model (:mod:`~remnant.sweep.measure`: build, then measure) on an
executor (:mod:`~remnant.sweep.executors`: in process, or Ray tasks), and is the only writer of the one record
store; checkpoints go to a content-addressed store (:mod:`~remnant.states.store`, :mod:`~remnant.sweep.weights`)
shared across specs. :mod:`~remnant.sweep.table` and :mod:`~remnant.sweep.report` turn the records into the
results table the studies read, and the HTML page. Research measurements: nothing here adjudicates (C-H6).
"""

from typing import TYPE_CHECKING

from remnant.lazy import lazy_exports

if TYPE_CHECKING:
    from remnant.sweep.spec import ExistingSpec, GeneratedSpec, load_spec, parse_spec

#: Imported on first use: the package's command module and its small helpers load without the rest (a light start).
__getattr__ = lazy_exports(
    __name__,
    {
        "ExistingSpec": "spec",
        "GeneratedSpec": "spec",
        "load_spec": "spec",
        "parse_spec": "spec",
    },
)

__all__ = ["ExistingSpec", "GeneratedSpec", "load_spec", "parse_spec"]
