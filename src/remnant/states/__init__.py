"""Model states: what determines a state's weights (:mod:`~remnant.states.recipe`), the one content-addressed
store that keeps built states on a local disk or object storage (:mod:`~remnant.states.store`,
:mod:`~remnant.states.remote`), and a worker's cache of loaded states (:mod:`~remnant.states.cache`); how a pool
uses them: docs/sweep.md, "Storage"."""
