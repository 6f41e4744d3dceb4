"""Research studies of the audits themselves — non-adjudicating (C-H6, C-H9). See docs/studies.md.

Pure core (no torch; the results and items tables they read are :mod:`remnant.results`, below both the sweep
that writes them and the studies):

* ``orientation`` — m, higher = more target knowledge, per metric;
* ``config`` and ``registration`` — each study's config, frozen with :func:`remnant.prereg.freeze_values`;
* ``faithfulness``, ``robustness``, ``meta_eval`` — ``remnant study meta-eval`` (the UDS paper §4);
* ``recovery`` — ``remnant study recovery`` (the J-Access paper, Test 2);
* ``readmission`` — the Annex B.4 decision over an estimator's cells (C-H9);
* ``goodhart_core`` — the Goodhart arm's record and reading (the J-Access paper, Test 3);
* ``published``, ``document``, ``plots``, ``report`` — the papers' figures and the reports;
* ``commands`` — the one ``remnant study`` group.

Model side (torch, imported only by the commands that train): ``latent_probe`` and ``latent_probe_states``
(Annex B's direction-probe study and its model states; the estimators stay in :mod:`remnant.latent`),
``readmission_run`` (the estimators on those states), ``goodhart_objective`` and ``goodhart`` (the
audit-penalised removal, never a registered method), ``auditor_table`` and ``auditors`` (seed 003's black-box
auditors as ROUGE-L tables).
"""

__all__: list[str] = []
