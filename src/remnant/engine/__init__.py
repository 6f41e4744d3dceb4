"""One measurement engine: registered measurements run over model states by one cell runner.

Every number remnant records comes from a :class:`~remnant.engine.measurement.Measurement`: a registered component
(name, version, every parameter) that declares the states it runs on, hashes everything that determines its
numbers into a cell key, and returns typed records. :func:`~remnant.engine.measurement.run_measurement` runs one
on one state through a :class:`~remnant.engine.runner.CellRunner` (a cell already in the records is skipped on
``--resume``, a cache shares cells between assessments, one record store). An assessment schedules its cells
through it (:mod:`remnant.assess.schedule`), and so does a pool of models (:mod:`remnant.sweep`).

The contract and the runner:

- :mod:`remnant.engine.measurement`: :class:`Measurement`, the :class:`State` it reads, :func:`run_measurement`,
  :func:`run_on_states`, and :class:`NotRun`, the one cell that records why it did not run;
- :mod:`remnant.engine.runner`: :class:`CellRunner` over a record store (a run's file, or a sweep worker's
  :class:`MemoryStore`) and :class:`CellCache`;
- :mod:`remnant.engine.cell` (pure): where a cell's records go and the one way a cell record is written.

The measurement kinds, one module each:

- :mod:`~remnant.engine.attack` (``attack``): a registered attack, or none (the unattacked baseline), on the probe
  set (C-Q1..C-Q4); ``not_applicable`` records a declared attack that does not apply (C-Q2);
- :mod:`~remnant.engine.utility` (``utility``): a utility metric on a state or a relearned copy (R10-R12);
- :mod:`~remnant.engine.relearning` (``relearning``): one budget of the relearning procedure (C-W1..C-W6);
- :mod:`~remnant.engine.classd` (``classd``): a Class D risk under one method, and the battery's relearning
  (D-2 to D-5.3);
- :mod:`~remnant.metrics.measurement` (``metric``): the field's metrics (TOFU, MUSE, MIA), one cell per metric,
  the pending ones read from one shared pass (it lives beside the metrics it runs: the engine imports no metric);
- :mod:`~remnant.engine.audit` (``audit``): a white-box audit, written as readings that never adjudicate (C-H6,
  C-H7).

``tests/contract/`` runs every registered component of every kind through its measurement on the tiny model; how
to add a component or a kind: docs/extending.md.
"""
