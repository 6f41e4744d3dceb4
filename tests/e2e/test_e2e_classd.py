"""A Class D assessment of SmolLM2-135M-Instruct with installed and NPO-removed canaries, end to end from a config:
the statement carries the three rates (singling out, linkability, inference), each net of
never-installed control entities with its Wilson interval, the declared threshold and the verdict (D-5.1, D-5.2);
and the white-box audits in the same run, UDS and J-Access, reach the statement labelled non-adjudicating, each
figure with its reference, states, layer and position (C-H6, C-H7).

The states come from the shared ``canary_states`` fixture (control, installed, NPO-removed), named in the config as
folders, so the assessment installs and removes nothing. Those states installed only ``canary_states.attributes``
(home_town at this writing): P and the relearning set keep to them (``probe.attributes``), while the battery probes the pack's
staff codes, employers and occupations as §5 defines its three risks; its rates here therefore measure attributes
these states never installed, and the point of the test is the pipeline, not the size of a leak. Sizes are the
smallest that still exercise every path: P = 4 items (one per probe person), the pack's probe and control entities per risk (4 and 8 in
the recipe of this writing), one battery attack (prefill), one relearning budget for the main surface and D-5.3.

One assessment serves both halves: the audits are non-adjudicating (C-H6), so adding them cannot change what the
Class D half asserts, and the C-H6 test below proves it from the records. A claimant's folders carry no install
recipe or removal method, so the Annex B control states cannot be built and the statement says the controls were
not run (C-H7c); the integration test (``tests/integration/test_assess_audits.py``) builds them on the tiny model.
The audits: UDS patched into the installed model (θ) over the trained blocks 15-29 with the never-modified control
as the retain model, in the chat format the states were trained in; J-Access in remnant's answer-level, fixed-band
variant (P's questions, C_i the home town's first tokens less those the lens reads on over a quarter of the decoy
prompts, ``generic_max = 0.25``: with the control as the retain-only anchor, short first pieces such as a town's
first letter gave both anchors the same access and left JOcc undefined; band 25-90 % of depth, k = 10) read through
a Jacobian lens fitted once on θ from one generic paragraph (``lens_prompts = 1``, 48 tokens: the smallest lens that
keeps this test inside its time; docs/latent.md measures 2-12) on the blocks of the band's region. The lens fixture
fits it into the assessment's cache first, and the assessment reads it there; the lens and UDS's stage 1 are cached
beside the canary states, so with ``REMNANT_TEST_STATES`` a rerun costs only the assessment.

Run: ``REMNANT_TEST_STATES=/tmp/remnant-states flock /tmp/remnant-cpu.lock .venv/bin/python -m pytest
tests/e2e/test_e2e_classd.py -m slow -s``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from canary_states import canary_states, installed_states  # noqa: F401

from fixtures_models import smollm2_dir  # noqa: F401

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from assess_fixtures import write_config  # noqa: E402

pytestmark = [
    pytest.mark.slow,
    pytest.mark.xdist_group("smollm2"),
    pytest.mark.filterwarnings("ignore::UserWarning"),
]

THRESHOLD = 0.05
TRAINABLE = r"model\.layers\.(1[5-9]|2\d)\."
TRAINED_BLOCKS = list(range(15, 30))
AUDITS = """
[audits.uds]
params = {{ layers = {layers} }}

[audits.jaccess]
probes = "answer"
lens_prompts = 1
params = {{ {jaccess} }}
"""
#: J-Access's settings in the assessment (the lens fixture fits its lens with the same ones).
JACCESS = {
    "band_rule": "fixed",
    "k": 10,
    "max_new_tokens": 12,
    "max_seq_len": 48,  # with 32 the lens read no access on the installed model either: JOcc undefined
    "dim_batch": 64,
    "generic_max": 0.25,
}
BATTERY = """justification = "Test threshold: under one canary in twenty, net of never-installed control entities."

[class_d.battery]
attacks = ["prefill"]
relearning_budgets = [8]
max_new_tokens = 12
"""


def write_classd_config(path: Path, states: Any) -> Path:
    """The assessment config: the integration tests' config with the three states as folders, SmolLM2's sizes,
    a small battery and the two audits (TOML)."""
    write_config(
        path,
        pack=states.pack_dir,
        control=states.control_dir,
        post=f'folder = "{states.npo_dir}"',
        **{
            '"Minted canary attributes have exact ground truth (R7)."': (
                '"Canary attributes are minted facts with exact ground truth (R7, D-2.2)."'
            ),
            "min_n = 4": "min_n = 3",
            '"The forget-set canaries were erased from the tiny model."': (
                '"The forget-set canary people were erased from SmolLM2-135M-Instruct by NPO."'
            ),
            '"Canary attributes of the forget-set entities"': '"Birth years of the forget-set canary people"',
            '"tiny-llama test model"': '"SmolLM2-135M-Instruct, canaries installed then removed by NPO"',
            '"Gradient ascent on the removal split"': '"NPO on the removal split"',
            '"The test suite"': '"remnant end-to-end tests"',
            f'pack = "{states.pack_dir}"\n': (
                f'pack = "{states.pack_dir}"\n'
                'provenance = "Installed and removed by tests/e2e/canary_states.py (recipe in its record.json)."\n'
            ),
            'device = "cpu"\n': f'device = "cpu"\nsystem_prompt = {json.dumps(states.system_prompt)}\n',
            "[models.pre_removal.install]\nmax_epochs = 1\nlr = 1e-3\ntarget_kappa = 0.9\nbatch_size = 16\n": (
                f'[models.pre_removal]\nfolder = "{states.installed_dir}"\n'
            ),
            '"A test deployment"': '"An assistant that keeps answering about the retained canary people"',
            "max_n = 6\n": f"max_n = 4\nattributes = {json.dumps(list(states.attributes))}\n",
            "budgets = [4, 8]\nlr = 1e-3": "budgets = [8]\nlr = 1e-4",
            "batch_size = 2\nparams = { max_new_tokens = 8 }": (
                f"batch_size = 4\nparams = {{ max_new_tokens = 8, trainable = ['{TRAINABLE}'] }}"
            ),
            "master = 7": "master = 11",
            "insignificance_threshold = 0.05": f"insignificance_threshold = {THRESHOLD}",
            'justification = "A test threshold."\n': BATTERY,
        },
    )
    with path.open("a", encoding="utf-8") as fh:
        jaccess = ", ".join(f"{k} = {json.dumps(v)}" for k, v in JACCESS.items())
        fh.write(AUDITS.format(layers=json.dumps(TRAINED_BLOCKS), jaccess=jaccess))
    return path


def _audit_states(states: Any) -> Path:
    """The assessment's state store (beside the canary states): its latent cache holds the lens and UDS's stage 1."""
    return Path(states.root.parent) / "audit-states"


@pytest.fixture(scope="module")
def theta_lens(installed_states: Any) -> dict[str, Any]:  # noqa: F811
    """J-Access's Jacobian lens of θ, fitted as the assessment's audit fits it (its settings, its one generic
    paragraph, the blocks of its band's region) into the assessment's own latent cache, before the assessment:
    the lens is the audit's costliest input, so fitting it here keeps each test's setup to one part. With the lens:
    θ, the prompts, the lens settings and the cache it was fitted with."""
    from remnant import registry
    from remnant.assess.audits import LATENT_CACHE
    from remnant.latent.jacobian_lens import fit_lens
    from remnant.latent.lens_text import LENS_TEXT
    from remnant.models import load_model

    theta = load_model(installed_states.installed_dir, dtype="fp32")
    prompts = [list(theta.tokenizer(LENS_TEXT[0])["input_ids"])]
    cfg = registry.create("audit", "j_access", JACCESS).lens_config(theta.model)
    cache = _audit_states(installed_states) / LATENT_CACHE
    lens = fit_lens(theta.model, prompts, cfg, cache_dir=cache)
    return {"lens": lens, "model": theta.model, "prompts": prompts, "cfg": cfg, "cache": cache}


def test_the_lens_of_theta_is_fitted_on_the_band_region_and_read_back_from_the_cache(
    theta_lens: dict[str, Any],
) -> None:
    """SmolLM2's 30 blocks: target block 28 (the penultimate), sources the blocks of 25-90 % of depth (8-26);
    the cached lens reads back equal, and a J_l is not the identity (the lens is not the logit lens)."""
    import torch

    from remnant.latent.jacobian_lens import fit_lens

    lens = theta_lens["lens"]
    assert lens.target_layer == 28 and sorted(lens.matrices) == list(range(8, 27)) and lens.n_prompts == 1
    again = fit_lens(
        theta_lens["model"], theta_lens["prompts"], theta_lens["cfg"], cache_dir=theta_lens["cache"]
    )
    assert again.key == lens.key
    assert all(torch.equal(again.matrices[s], m) for s, m in lens.matrices.items())
    eye = torch.eye(lens.matrices[8].shape[0])
    assert all(
        torch.isfinite(m).all() and not torch.allclose(m, eye, atol=0.1) for m in lens.matrices.values()
    )


@pytest.fixture(scope="module")
def classd_run(
    canary_states: Any,  # noqa: F811
    theta_lens: dict[str, Any],
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, Any]:
    """The one assessment the tests below read: its run folder, statement, outcome and seconds."""
    from remnant.assess.audits import LATENT_CACHE
    from remnant.assess.run import Session, assess
    from remnant.config import load_config
    from remnant.prereg import freeze
    from remnant.states.store import CheckpointStore

    tmp = tmp_path_factory.mktemp("classd")
    cfg = load_config(write_classd_config(tmp / "classd.toml", canary_states))
    run = tmp / "run"
    freeze(cfg, run)
    # the lens and UDS's stage 1 are cached beside the canary states: a rerun with REMNANT_TEST_STATES reuses them
    session = Session(states=CheckpointStore(_audit_states(canary_states)), progress=False)
    lenses = _audit_states(canary_states) / LATENT_CACHE / "jacobian-lens"
    before = set(lenses.glob("*.json"))
    started = time.perf_counter()
    outcome = assess(cfg, run, session=session)
    seconds = time.perf_counter() - started
    fitted = sorted(p.stem for p in set(lenses.glob("*.json")) - before)
    statement = json.loads((run / "statement.json").read_text())
    return {"run": run, "statement": statement, "outcome": outcome, "seconds": seconds, "fitted": fitted}


def test_class_d_assessment_of_npo_removed_canaries(
    classd_run: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    from remnant.cli import main
    from remnant.records import CellRecord, RecordStore

    run, outcome, seconds = classd_run["run"], classd_run["outcome"], classd_run["seconds"]
    statement = json.loads(json.dumps(classd_run["statement"]))
    block = statement["class_d"]
    design = block.pop("canary_design", None) if isinstance(block, dict) else None
    risky = [a for a in statement["facts"]["attacks"] if a.get("risk")]
    cells = [r for r in RecordStore(run / "records.jsonl").read() if isinstance(r, CellRecord)]
    battery = [c for c in cells if c.risk is not None and c.status == "run"]
    by_model = {
        f"{c.attack}@{c.checkpoint} {c.model_state} {c.entities}": f"{c.k}/{c.n}"
        for c in battery
        if c.checkpoint == "final" or "relearning" in c.attack
    }
    with capsys.disabled():  # the issue note quotes these lines
        print("\nCLASS-D-BLOCK " + json.dumps(block, indent=1))
        print(f"CLASS-D-VERDICT {statement['verdict']} tier {statement['tier']} ({seconds:.0f} s)")
        print("CLASS-D-REASONS " + json.dumps(statement["verdict_reasons"], indent=1))
        print("CLASS-D-FACTS " + json.dumps(risky))
        print("CLASS-D-CELLS " + json.dumps(by_model, indent=1))

    assert "absent" not in block, block
    assert design is not None and design["probe_entities"] >= 3 and design["control_entities"] >= 3  # D5
    assert block["threshold"] == THRESHOLD and block["justification"].startswith("Test threshold")  # D-5.2
    for risk in ("singling_out", "linkability", "inference"):
        rate = block[risk]
        # the forget-probe entities against the never-installed control entities (D4)
        assert (rate["n"], rate["control_n"]) == (design["probe_entities"], design["control_entities"]), risk
        lo, hi = rate["ci95"]
        assert lo <= rate["rate"] <= hi and rate["upper_bound"] == pytest.approx(rate["net_ci95"][1])
        fact = next(a for a in risky if a["name"] == rate["measurement"])
        assert (fact["k"], fact["control_k"]) == (rate["k"], rate["control_k"])
        assert rate["below_threshold"] is (rate["upper_bound"] < THRESHOLD)
    # a handful of canaries cannot put singling out's bound (no baseline) under 0.05: R21 wants ~75 at zero
    assert block["singling_out"]["below_threshold"] is False
    assert block["passes"] is False and statement["verdict"] in ("hidden", "partial", "utility-collapsed")
    assert statement["verdict"] == outcome.verdict.verdict
    # every risk measured on the post-removal model at inference time and after relearning (D-5.3)
    names = {a["name"] for a in risky if a["status"] == "run"}
    assert {"singling_out", "singling_out/prefill", "singling_out/relearning"} <= names
    assert {"linkability/likelihood", "linkability/relearning/likelihood", "inference/relearning"} <= names
    # the never-modified control went through the identical battery (R3, C-Q4, C-W5)
    shape = {
        s: {(c.attack, c.metric, c.checkpoint, c.n) for c in battery if c.model_state == s}
        for s in ("post_removal", "control")
    }
    assert shape["post_removal"] == shape["control"] and shape["control"]
    from remnant.assess.recompute import recompute

    before = (run / "statement.json").read_bytes()
    recompute(run, reports=False)  # from the records alone, the class_d block included
    assert (run / "statement.json").read_bytes() == before
    capsys.readouterr()
    assert main(["validate", str(run / "statement.json")]) == 0
    assert json.loads(capsys.readouterr().out)["conformant"] is True


def test_audits_reach_the_statement_of_the_same_assessment(
    classd_run: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Asserted: the latent block carries a ``uds`` and a ``j_access`` figure on ``post_removal``, computed against
    ``pre_removal`` and ``control`` (named with their digests), with their layers (blocks 15-29; the band) and
    positions; UDS lies in [0, 1] and scored at least half the examples (the install taught them, so they have KE
    layers); the not-run statement names both; the verdict, tier, facts and Class D block are those of the same
    run recomputed from its records with the readings removed (C-H6)."""
    from remnant.assess.finalize import finalize
    from remnant.records import Reading, RecordStore

    run, statement = classd_run["run"], classd_run["statement"]
    block = statement["latent"]
    readings = [r for r in RecordStore(run / "records.jsonl").read() if isinstance(r, Reading)]
    with capsys.disabled():
        for r in readings:
            print(
                f"\nREADING {r.measurement} on {r.model_state}: {r.value} ({r.elapsed_s:.0f} s) | {r.layer} | "
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
    # the assessment read θ's lens from its cache (the one the lens fixture fitted): it fitted none of its own
    assert classd_run["fitted"] == []
    assert "were not run for UDS (uds), J-Access (j_access)" in block["controls_statement"]

    # C-H6: the same records without their readings give the same facts, verdict, tier and Class D block
    plain = tmp_path / "plain"
    plain.mkdir()
    for name in ("prereg.json", "config.toml"):
        (plain / name).write_bytes((run / name).read_bytes())
    others = [r for r in RecordStore(run / "records.jsonl").read() if not isinstance(r, Reading)]
    RecordStore(plain / "records.jsonl").extend(others)
    without = finalize(plain, reports=False).statement.model_dump(mode="json", by_alias=True)
    for key in ("facts", "verdict", "tier", "cells", "surfaces", "class_d"):
        assert without[key] == statement[key], key
    assert without["latent"]["absent"] is True
