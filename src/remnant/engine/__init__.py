"""One measurement engine: registered measurements run over model states by one cell runner (DESIGN §7).

- :mod:`remnant.engine.cell` (pure): where a cell's records go and how a cell record is written;
- :mod:`remnant.engine.measurement`: the :class:`Measurement` contract and :func:`run_measurement`;
- :mod:`remnant.engine.runner`: :class:`CellRunner` (resume, shared cache, progress, one record store).
"""
