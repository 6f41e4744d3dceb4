"""J-Access on the real SmolLM2-135M-Instruct (calibration, `make calibrate`): what the lens reads of NPO.

The criterion, measured as the J-Access paper, eqs. 3-6 define it — in remnant's answer-level, fixed-band variant
(``jaccess_measure``'s docstring; not the ``j_access`` audit's identity-level defaults) — on states built so
that the retain-only anchor is ignorant of the forget answers (``canary_states.JACCESS_RECIPE``): every person
has a town of their own, and each town's first token, with and without a leading space, is at least three
characters and no other town's (``FirstPieceScreen``), so C_i (the first token) is not a letter every model
predicts. 16 forget people, 48 install questions as probes. The installed (100 %) model is the original
anchor, NPO the audited model, and the control installed with the same recipe on the retained people only is
the retain-only anchor. The Jacobian lens is fitted once, on the installed model (a fixed decoder), from
``N_LENS_PROMPTS`` generic paragraphs.

Asserted: the states are what they claim (installed knows P, NPO and the retain-only model do not emit it); the
lens reads the installed model's access above the retain-only model's on NPO's silent probes (the audit can see
knowledge at all); A(100 %) ≥ A(NPO); and what must hold of any readout. Whether NPO's own access sits above the
retain-only level is the measured figure, printed and reported in docs/latent.md, not asserted: it moved from
+0.21 [+0.07, +0.36] to −0.02 [−0.12, +0.05] when only the training data order changed (docs/latent.md,
"J-Access on states built for it"). A calibration test, not in `make test`: it trains its own states and takes
about a quarter hour on 2 cores. Non-adjudicating (C-H6): none of this enters a verdict. Numbers print with
``-s``; ``measure_jaccess_distinct.py`` re-measures them with other k and lens sizes.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import torch
from canary_states import jaccess_states, score_sets  # noqa: F401
from jaccess_measure import LENS, LENS_TEXT, N_LENS_PROMPTS, audit_inputs, measure

from fixtures_models import smollm2_dir  # noqa: F401
from remnant.latent.jacobian_lens import fit_lens
from remnant.train.data import as_qa

pytestmark = [pytest.mark.slow, pytest.mark.calibration, pytest.mark.xdist_group("smollm2")]


def test_jaccess_reads_installed_access_and_measures_npo(jaccess_states: Any) -> None:  # noqa: F811
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        _run(jaccess_states)
    finally:
        torch.set_num_threads(before)


def _run(cs: Any) -> None:
    pack, fmt, attrs = cs.pack(), cs.fmt(), cs.attributes
    t0 = time.perf_counter()
    inputs = audit_inputs(cs)
    t_states = time.perf_counter() - t0
    tok, states, probe_items = inputs.tok, inputs.states, inputs.probe_items
    towns = [e.attributes["home_town"] for e in pack.manifest.entities]
    assert len(set(towns)) == len(towns) and pack.manifest.design["attributes"]["home_town"]["screen"]

    probe_set = {"P": as_qa(probe_items, attrs)}
    kappa = {name: score_sets(model, tok, probe_set, fmt)["P"] for name, model in states.items()}
    t0 = time.perf_counter()
    prompts = [list(tok(text)["input_ids"]) for text in LENS_TEXT[:N_LENS_PROMPTS]]
    lens = fit_lens(states["100%"], prompts, LENS, cache_dir=cs.root / "latent-cache")
    t_lens = time.perf_counter() - t0
    t0 = time.perf_counter()
    rows = {row.label: row for row in measure(states, tok, fmt, probe_items, inputs.decoy_items, lens)}
    t_read = time.perf_counter() - t0
    n = len(probe_items)
    print(
        f"\nJ-Access on JACCESS_RECIPE states ({cs.root.name}; SmolLM2-135M-Instruct, k=10, blocks 8-26, last 8 "
        f"positions, first-token C_i; fixed decoder fitted on {lens.n_prompts} generic prompts; {n} probes of "
        f"{inputs.n_forget_people} forget people)\nκ on the probes (k/n): {json.dumps(kappa)}\n"
        + "\n".join(row.line(n) for row in rows.values())
        + f"\nretain-only model {t_states:.0f} s; lens {t_lens:.0f} s; readouts {t_read:.0f} s"
    )
    # The states: the installed model answers the probes, NPO and the retain-only model do not (R2, B.6).
    assert kappa["100%"][0] >= 0.9 * n and kappa["npo"][0] <= 0.1 * n and kappa["0%"][0] <= 0.1 * n
    jac, spec, logit = rows["jacobian"], rows["jacobian, generic dropped"], rows["logit lens"]
    # The lens sees installed knowledge the retain-only model never had (docs/latent.md, "J-Access on states
    # built for it"); NPO's own gap is the measurement, printed above.
    for row in (jac, spec):
        assert row.result.access_original > row.result.access_retain, row.line(n)
        assert row.result.access_original >= row.result.access_audited, row.line(n)
    assert jac.result.decoder == "fixed" and logit.result.decoder == "logit"
    for name in ("npo", "100%", "0%"):  # fewer concept tokens can only lose hits, probe by probe
        pairs = zip(jac.reads[name].probes, spec.reads[name].probes, strict=True)
        assert all(a.idx == b.idx and (a.hit or not b.hit) for a, b in pairs)
    for row in rows.values():
        r = row.result
        assert r.n_probes == n and 0 < r.n_silent <= n and sum(row.cells.values()) == r.n_silent
        for value in (r.access_audited, r.access_original, r.access_retain):
            assert value is None or 0.0 <= value <= 1.0
        gap, ci = r.retain_gap, r.retain_gap_ci95
        assert gap is not None and ci is not None and ci[0] <= gap <= ci[1]
        assert gap == pytest.approx(r.access_audited - r.access_retain)
