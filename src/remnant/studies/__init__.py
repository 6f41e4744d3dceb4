"""Research studies of the audits themselves — non-adjudicating (C-H6, C-H9). See docs/studies.md.

The pool studies, the readmission decision, the reports and the ``remnant study`` commands are pure core (no
torch; the results and items tables they read are :mod:`remnant.results`, below both the sweep that writes them
and the studies). The model side — ``latent_probe``, ``latent_probe_states``, ``readmission_run``,
``goodhart_objective``, ``goodhart``, ``auditor_table`` and ``auditors`` — imports torch and is imported only by
the commands that train; the latent estimators stay in :mod:`remnant.latent`.
"""

__all__: list[str] = []
