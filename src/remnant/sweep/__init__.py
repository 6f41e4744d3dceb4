"""Pools of models: ``remnant sweep`` builds and measures tens to hundreds of checkpoints (docs/sweep.md).

A pool spec (:mod:`~remnant.sweep.spec`) declares the models — generated here (a base model, a pack, the install
recipe, the P- and N-pool references, a removal grid) or existing folders with labels — the measurement suite,
the perturbations (NF4, one-epoch relearning) and the resources a task needs. The driver
(:mod:`~remnant.sweep.driver`) runs one task per model (build, then measure) on an executor (in process, or Ray
tasks) and is the only writer of the one record store; checkpoints go to a content-addressed store
(:mod:`~remnant.states.store`) shared across specs. The records become the results table the studies read, and
the HTML page. Research measurements: nothing here adjudicates (C-H6).
"""
