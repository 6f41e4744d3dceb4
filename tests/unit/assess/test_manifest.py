"""The run manifest (R23-R25): what it records, its digest as the statement's manifest_ref, R25's margin warnings."""

from __future__ import annotations

import copy
import hashlib
import importlib.metadata
import json
import platform
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from remnant import __version__
from remnant.curves import CurvePoint, RelearningCurve
from remnant.errors import ConfigError
from remnant.models.identity import ModelIdentity
from remnant.packs import ClassDSpec, mint_class_d
from remnant.registry import ComponentSpec
from remnant.report.redact import canary_strings
from remnant.run_manifest import (
    ComponentRecord,
    ModelRecord,
    PrecisionReduction,
    PreregRecord,
    RunManifest,
    build_manifest,
    capture_environment,
    check_manifest_ref,
    gguf_origin,
    load_manifest,
    manifest_bytes,
    pack_record,
    precision_warnings,
    write_manifest,
)
from remnant.statement.absent import Absent
from remnant.statement.build import build_statement, cells_from_facts
from remnant.statement.example import EXAMPLE_DATE, example_facts, example_statement
from remnant.statement.schema import Deviation, Versions
from remnant.statement.validate import validate_statement

PACK = mint_class_d(ClassDSpec(entities=8, controls=2, seed=3))
IDENTITY = ModelIdentity(
    weights={"model.safetensors": "a" * 64},
    tokenizer={"tokenizer.json": "b" * 64},
    chat_template="c" * 64,
    architecture="LlamaForCausalLM",
    parameter_count=134515008,
    dtype="bfloat16",
    device="cpu",
    digest="d" * 64,
)
CURVE = RelearningCurve(
    budget=40,
    tau=0.5,
    points=[
        CurvePoint(checkpoint="step-0", step=0, examples=0, post_k=1, post_n=50, control_k=0, control_n=50),
        CurvePoint(checkpoint="step-4", step=4, examples=16, post_k=25, post_n=50, control_k=2, control_n=50),
    ],
)


def make_manifest(
    facts: dict[str, Any] | None = None,
    *,
    reductions: Sequence[PrecisionReduction] = (),
    deviations: Sequence[Deviation] = (),
) -> RunManifest:
    facts = facts if facts is not None else example_facts()
    return build_manifest(
        run_id="run-1",
        claim="The model no longer reproduces the installed target facts of pack example-c.",
        assessment_date=EXAMPLE_DATE,
        versions=Versions(standard="0.3", pack_schema="1.0", harness=__version__),
        facts=facts,
        models=[
            ModelRecord(role="control", name="SmolLM2-135M-Instruct", source="zoo", identity=IDENTITY),
            ModelRecord(
                role="post_removal",
                name="SmolLM2-135M-Instruct",
                source="removal: npo",
                identity=Absent(reason="held in memory only"),
            ),
        ],
        seeds={"prereg": 7, "install": 8, "removal": 9, "relearn": 10},
        hyperparameters={"relearn": {"lr": 1e-4, "batch_size": 4, "checkpoints": [0, 4]}},
        components=[
            ComponentRecord(
                role="attack",
                **ComponentSpec("attack", "prefill", "1", {"tokens": (1, 2), "seed": 7}).to_dict(),
            ),
            ComponentRecord(role="removal", kind="method", name="npo", version="2", params={"beta": 0.1}),
        ],
        pack=pack_record(PACK.manifest, location="/runs/pack"),
        prereg=PreregRecord(
            digest="sha256:" + "0" * 64,
            registered_at="2026-05-20T09:00:00Z",
            values={"tau": facts["tau"], "phi": facts["phi"], "min_n": 300, "gating_metric": "kappa"},
        ),
        environment=capture_environment(device="cpu", dtype="bfloat16"),
        config={"claim": "…", "tau": facts["tau"], "budgets": (40,)},
        deviations=deviations,
        curves=[CURVE],
        reductions=reductions,
        commands=["remnant preregister config.toml --out RUN", "remnant assess config.toml --out RUN"],
        artifacts={"prereg.json": "sha256:" + "0" * 64},
    )


def test_manifest_records_what_r23_lists() -> None:
    deviation = Deviation(field="min_n", old=300, new=250, reason="filter", stage="mint")
    data = json.loads(manifest_bytes(make_manifest(deviations=[deviation])))
    assert [m["identity"].get("digest") for m in data["models"]] == ["d" * 64, None]
    assert data["seeds"] == {"prereg": 7, "install": 8, "removal": 9, "relearn": 10}
    assert data["hyperparameters"]["relearn"]["checkpoints"] == [0, 4]
    assert data["components"][0] == {
        "role": "attack",
        "kind": "attack",
        "name": "prefill",
        "version": "1",
        "params": {"tokens": [1, 2], "seed": 7},
    }
    assert data["pack"]["digest"] == PACK.digest and data["pack"]["class"] == "D"
    assert data["standard_version"] == "0.3"
    assert data["versions"] == {"standard": "0.3", "pack_schema": "1.0", "harness": __version__}  # Z1
    assert data["pre_registration"]["values"]["min_n"] == 300
    assert data["deviations"] == [deviation.model_dump(mode="json")]
    assert data["results"]["curves"][0]["points"][1]["post_k"] == 25  # C-W5 curves, every checkpoint
    assert data["reproduction"]["config"]["budgets"] == [40]


def test_manifest_cells_are_the_statements_cells() -> None:
    """R22/R23: the manifest's per-cell table is exactly the one the statement carries."""
    manifest = make_manifest()
    assert manifest.results.cells == example_statement().cells
    assert manifest.results.cells == cells_from_facts(example_facts())


def test_manifest_never_copies_canary_values() -> None:
    """R18: the pack is named by id, seed and digest; no name, attribute value or item text travels."""
    text = manifest_bytes(make_manifest()).decode()
    canaries = canary_strings(PACK) - {PACK.manifest.id}
    assert not [c for c in canaries if c in text and len(c) >= 5]


def test_written_manifest_is_what_the_statement_cites(tmp_path: Path) -> None:
    manifest = make_manifest()
    ref = write_manifest(manifest, tmp_path)
    path = tmp_path / "manifest.json"
    assert ref == "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    assert check_manifest_ref(path, ref)
    assert load_manifest(path) == manifest
    base = example_statement()
    statement = build_statement(
        example_facts(),
        claim=manifest.claim,
        model=base.model,
        prereg=base.pre_registration,
        pack=base.pack,
        assessor=base.assessor,
        manifest_ref=ref,
        assessed_on=manifest.assessment_date,
        versions=base.versions,
        target="pack example-c",
    )
    assert validate_statement(statement.model_dump(mode="json", by_alias=True)).conformant
    path.write_bytes(path.read_bytes().replace(b'"run-1"', b'"run-2"'))
    assert not check_manifest_ref(path, ref)


def test_manifest_bytes_are_deterministic() -> None:
    """A resumed run rebuilds the same manifest, so its statement cites the same manifest_ref."""
    assert manifest_bytes(make_manifest()) == manifest_bytes(make_manifest())


def test_load_refuses_unknown_fields_and_bad_json(tmp_path: Path) -> None:
    data = json.loads(manifest_bytes(make_manifest()))
    data["results"]["surprise"] = 1
    bad = tmp_path / "manifest.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=r"manifest.json: field results.surprise.*\(R23\)"):
        load_manifest(bad)
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="cannot read as JSON"):
        load_manifest(bad)


def test_environment_records_interpreter_and_packages() -> None:
    env = capture_environment(device="cpu", dtype="float32")
    assert env.python == platform.python_version()
    assert env.packages["pydantic"] == importlib.metadata.version("pydantic")
    assert env.packages["remnant"] == importlib.metadata.version("remnant")
    assert env.device == "cpu" and env.dtype == "float32" and env.gpu is None
    assert env.cpu


def test_manifest_module_imports_no_torch() -> None:
    code = "import sys, remnant.run_manifest\nprint('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def _reduction(rate: float, utility: float = 0.0) -> PrecisionReduction:
    return PrecisionReduction(
        stage="scoring",
        description="bf16 forward passes",
        dtype="bf16",
        reference="fp32",
        rate_margin=rate,
        utility_margin=utility,
        basis="declared",
    )


def _near_facts(rule: str = "point", track: str = "W") -> dict[str, Any]:
    facts = copy.deepcopy(example_facts())
    facts.update(evidence_rule=rule, track=track, utility={"removal_stage": 0.905, "attack_stage": 0.99})
    # relearning 40/100: Wilson upper 0.4980, 0.002 under τ = 0.5; control 48/100 sits 0.02 under τ.
    facts["attacks"][0].update(k=40, n=100, control_k=48, control_n=100)
    return facts


def _warned(facts: dict[str, Any], rate: float, utility: float = 0.0) -> list[tuple[str, str, float]]:
    cells = cells_from_facts(facts)
    return [
        (w.threshold, w.quantity, round(w.value, 4)) for w in precision_warnings(facts, cells, rate, utility)
    ]


def test_r25_warns_where_a_threshold_lies_within_the_margin() -> None:
    facts = _near_facts()
    assert _warned(facts, 0.0) == []  # no reduction, no margin
    assert _warned(facts, 0.01, 0.01) == [
        ("phi", "removal-stage utility", 0.905),
        ("tau", "post-removal upper bound of relearning", 0.498),
    ]
    assert ("tau", "control rate of relearning", 0.48) in _warned(facts, 0.03)
    assert _warned(facts, 0.001) == []
    # Under the bounds rule, the control's upper bound (0.5768) is the verdict-relevant figure, 0.077 away.
    bounds = _warned(_near_facts("bounds"), 0.03)
    assert [q for _, q, _ in bounds] == ["post-removal upper bound of relearning"]
    assert ("tau", "control upper bound of relearning", 0.5768) in _warned(_near_facts("bounds"), 0.08)
    # Q-track does not admit relearning (R0.2): nothing about it is verdict-relevant.
    assert _warned(_near_facts(track="Q"), 0.03) == []


def test_manifest_carries_reductions_and_warnings() -> None:
    manifest = make_manifest(
        _near_facts(), reductions=[gguf_origin("SmolLM2-135M-Instruct.Q4_1.gguf", "Q4_1"), _reduction(0.01)]
    )
    assert manifest.precision.rate_margin == 0.01
    assert [r.dtype for r in manifest.precision.reductions] == ["Q4_1", "bf16"]
    [warning] = manifest.precision.warnings
    assert warning.cells == ["relearning/relearning/post_removal"]
    assert "within the precision margin ±0.0100 of τ = 0.5" in warning.message and "(R25)" in warning.message
