"""One measurement engine: registered measurements run over model states by one cell runner.

Every number remnant records comes from a :class:`~remnant.engine.measurement.Measurement` run through a
:class:`~remnant.engine.runner.CellRunner` (module docstrings there). The measurement kinds, one module each:
``attack`` (C-Q1..C-Q4), ``utility`` (R10-R12), ``relearning`` (C-W1..C-W6), ``classd`` (D-2 to D-5.3) and
``audit`` (readings that never adjudicate, C-H6, C-H7); the field's metrics (``metric``) live in
:mod:`remnant.metrics.measurement`, beside the metrics they run, so the engine imports no metric.

``tests/contract/`` runs every registered component of every kind through its measurement on the tiny model; how
to add a component or a kind: docs/extending.md.
"""
