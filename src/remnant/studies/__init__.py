"""Research studies of the audits themselves — non-adjudicating (C-H6, C-H9). See docs/studies.md.

Pure core (no torch; pyarrow only to read Parquet when it is installed):

* ``tables`` — the sweep/study contract's results and items tables;
* ``orientation`` — m, higher = more target knowledge, per metric;
* ``config`` and ``registration`` — each study's config, frozen with :func:`remnant.prereg.freeze_values`;
* ``faithfulness``, ``robustness``, ``meta_eval`` — ``remnant study meta-eval`` (the UDS paper §4);
* ``recovery`` — ``remnant study recovery`` (the J-Access paper, Test 2);
* ``readmission`` — the Annex B.4 decision over an estimator's cells (C-H9);
* ``goodhart_core`` — the Goodhart arm's record and reading (the J-Access paper, Test 3);
* ``published``, ``document``, ``plots``, ``report`` — the papers' figures and the reports;
* ``commands`` — the subcommands of the one ``remnant study`` group.

Model side (torch, imported only by the commands that train): ``readmission_run`` (the estimators on Annex B's
states, built by :mod:`remnant.latent.study_states`), ``goodhart_objective`` and ``goodhart`` (the audit-penalised
removal, never a registered method).
"""

__all__: list[str] = []
