"""White-box audits inside an assessment of SmolLM2-135M-Instruct (slow): UDS and J-Access on the NPO-removed
canaries reach the statement, labelled non-adjudicating, each figure with its reference, states, layer and position
(C-H6, C-H7).

The states are the shared ``canary_states`` (control, the canary install, NPO), named in the config as folders,
so nothing is installed or removed here. The assessment around the audits is the smallest that is conformant:
Q-track (no relearning), P = the first 4 home-town probe items, the three C-Q1 attacks at short generation
lengths, retain κ as utility. A claimant's folders carry no install recipe or removal method, so the Annex B
control states cannot be built and the statement says the controls were not run (C-H7c); the integration test
(``tests/integration/test_assess_audits.py``) builds them on the tiny model.

The audits: UDS patched into the installed model (θ) over the trained blocks 15-29 with the never-modified
control as the retain model, in the chat format the states were trained in; J-Access in remnant's answer-level,
fixed-band variant (P's questions, C_i the home town's first tokens, band 25-90 % of depth, k = 10) read through a
Jacobian lens fitted once on θ from one generic paragraph (``lens_prompts = 1``, 48 tokens: the smallest lens
that keeps this test inside its time; docs/latent.md measures 2-12). The lens and UDS's stage 1 are cached beside
the canary states, so with ``REMNANT_TEST_STATES`` a rerun costs only the assessment.

The figures print with ``-s``; the assertions hold only what must hold of any such run.

Asserted: the latent block carries a ``uds`` and a ``j_access`` figure on ``post_removal``, computed against
``pre_removal`` and ``control`` (named with their digests), with their layers (blocks 15-29; the band) and
positions; UDS lies in [0, 1] and scored at least half the examples (the install taught them, so they have KE
layers); the not-run statement names both; the verdict, tier and facts are those of the same run without audits
recomputed from its records with the readings removed (C-H6); ``remnant validate`` passes; ``remnant recompute``
writes the same statement bytes.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from canary_states import canary_states  # noqa: F401

from fixtures_models import smollm2_dir  # noqa: F401

pytestmark = [
    pytest.mark.slow,
    pytest.mark.xdist_group("smollm2"),
    pytest.mark.filterwarnings("ignore::UserWarning"),
]

TRAINED_BLOCKS = list(range(15, 30))

CONFIG = """
class = "D"
track = "Q"
preset = "quick"
gating_metric = "kappa"
gating_justification = "Canary attributes are minted facts with exact ground truth (R7, D-2.2)."
tau = 0.5
min_n = 4

[claim]
statement = "The forget-set canary people were erased from SmolLM2-135M-Instruct by NPO."
target = "Home towns of the forget-set canary people"
model = "SmolLM2-135M-Instruct, canaries installed then removed by NPO"
process = "NPO on the removal split"
audience = "remnant end-to-end tests"

[target]
pack = "{pack}"
provenance = "Installed and removed by tests/e2e/canary_states.py (recipe in its record.json)."

[models]
dtype = "float32"
device = "cpu"
system_prompt = {system_prompt}

[models.control]
folder = "{control}"

[models.pre_removal]
folder = "{installed}"

[models.post_removal]
folder = "{npo}"

[utility]
metrics = ["retain_kappa"]
phi = 0.5
deployment = "An assistant that keeps answering about the retained canary people"

[utility.params.retain_kappa]
max_new_tokens = 12

[probe]
splits = ["probe"]
max_n = 4
attributes = {attributes}

[attacks.prefill]
params = {{ max_new_tokens = 12 }}

[attacks.many_shot]
params = {{ shots = 2, max_new_tokens = 12 }}

[attacks.repeated_sampling]
params = {{ implementation = "repeated_sampling_analytic", n_samples = 8, ks = [1, 8] }}

[seeds]
master = 11

[class_d]
insignificance_threshold = 0.05
justification = "Test threshold: under one canary in twenty, net of never-installed control entities."
"""

AUDITS = """
[audits.uds]
params = {{ layers = {layers} }}

[audits.jaccess]
probes = "answer"
lens_prompts = 1
params = {{ band_rule = "fixed", k = 10, max_new_tokens = 12, max_seq_len = 48, dim_batch = 64 }}
"""


def _write(path: Path, states: Any, *, audits: bool) -> Path:
    text = CONFIG.format(
        pack=states.pack_dir,
        system_prompt=json.dumps(states.system_prompt),
        control=states.control_dir,
        installed=states.installed_dir,
        npo=states.npo_dir,
        attributes=json.dumps(list(states.attributes)),
    )
    if audits:
        text += AUDITS.format(layers=json.dumps(TRAINED_BLOCKS))
    path.write_text(text, encoding="utf-8")
    return path


def test_audits_reach_the_statement_of_an_assessment_of_smollm2(
    canary_states: Any,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import torch

    from remnant.assess.recompute import recompute
    from remnant.assess.run import Session, assess
    from remnant.cli import main
    from remnant.config import load_config
    from remnant.prereg import freeze
    from remnant.records import Reading, RecordStore

    torch.set_num_threads(2)
    cfg = load_config(_write(tmp_path / "audits.toml", canary_states, audits=True))
    run = tmp_path / "run"
    freeze(cfg, run)
    # the lens and UDS's stage 1 are cached beside the canary states: a rerun with REMNANT_TEST_STATES reuses them
    from remnant.states.store import CheckpointStore

    session = Session(states=CheckpointStore(canary_states.root.parent / "audit-states"), progress=False)
    started = time.perf_counter()
    outcome = assess(cfg, run, session=session)
    seconds = time.perf_counter() - started
    statement = json.loads((run / "statement.json").read_text())
    block = statement["latent"]
    readings = [r for r in RecordStore(run / "records.jsonl").read() if isinstance(r, Reading)]
    with capsys.disabled():
        print(f"\nAUDITS-E2E {seconds:.0f} s; verdict {statement['verdict']} tier {statement['tier']}")
        for r in readings:
            print(
                f"READING {r.measurement} on {r.model_state}: {r.value} ({r.elapsed_s:.0f} s) | {r.layer} | "
                f"{r.position[:160]} | details {json.dumps({k: v for k, v in r.details.items() if k != 'examples'})[:600]}"
            )
        print("LATENT-STATEMENT " + block["controls_statement"])

    figures = {f["name"]: f for f in block["figures"]}
    assert set(figures) == {"uds", "j_access"} and block["adjudicating"] is False
    control_digest = statement["model"]["control_identity"].split("sha256:")[1][:12]
    for f in figures.values():
        assert f["states"] == ["post_removal", "pre_removal", "control"]
        assert f"control {control_digest}" in f["reference"] and f["position"]
    uds, jacc = figures["uds"], figures["j_access"]
    assert uds["layer"].startswith("blocks 15-29, KE layers") and 0.0 <= uds["value"] <= 1.0
    scored = next(r for r in readings if r.measurement == "uds").details
    assert scored["n_scored"] >= scored["n_examples"] / 2  # the install taught P: its examples have KE layers
    assert jacc["layer"].startswith("band [") and "top-10" in jacc["position"]
    assert "were not run for UDS (uds), J-Access (j_access)" in block["controls_statement"]

    # C-H6: the same records without their readings give the same facts, verdict and tier
    plain = tmp_path / "plain"
    plain.mkdir()
    for name in ("prereg.json", "config.toml"):
        (plain / name).write_bytes((run / name).read_bytes())
    others = [r for r in RecordStore(run / "records.jsonl").read() if not isinstance(r, Reading)]
    RecordStore(plain / "records.jsonl").extend(others)
    from remnant.assess.finalize import finalize

    without = finalize(plain, reports=False).statement.model_dump(mode="json", by_alias=True)
    for key in ("facts", "verdict", "tier", "cells", "surfaces"):
        assert without[key] == statement[key], key
    assert without["latent"]["absent"] is True and statement["verdict"] == outcome.verdict.verdict

    capsys.readouterr()
    assert main(["validate", str(run / "statement.json")]) == 0
    assert json.loads(capsys.readouterr().out)["conformant"] is True
    before = (run / "statement.json").read_bytes()
    recompute(run, reports=False)
    assert (run / "statement.json").read_bytes() == before
