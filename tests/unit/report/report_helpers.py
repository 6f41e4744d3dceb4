"""Shared inputs for the report tests: statements built from the Annex D.2 example, hand-built curves, a small pack."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from remnant import __version__
from remnant.curves import CurvePoint, RelearningCurve
from remnant.run_manifest import (
    ModelRecord,
    PackRecord,
    PrecisionReduction,
    PreregRecord,
    RunManifest,
    build_manifest,
    capture_environment,
)
from remnant.statement.absent import Absent
from remnant.statement.build import build_statement
from remnant.statement.example import EXAMPLE_DATE, example_facts, example_statement
from remnant.statement.schema import ConformanceStatement, Deviation, Versions

#: (step, post_k, control_k) of a suppressing removal: the post-removal model recovers, the control does not.
HIDDEN_POINTS = [(0, 1, 0), (2, 10, 1), (4, 25, 2), (8, 35, 3), (10, 40, 3)]


def make_curve(
    points: Sequence[tuple[int, int, int]] = HIDDEN_POINTS, *, n: int = 50, tau: float = 0.5, budget: int = 40
) -> RelearningCurve:
    """A relearning curve with 4 examples a step and n items scored per checkpoint."""
    return RelearningCurve(
        budget=budget,
        tau=tau,
        points=[
            CurvePoint(
                checkpoint=f"step-{step}",
                step=step,
                examples=4 * step,
                post_k=k,
                post_n=n,
                control_k=ck,
                control_n=n,
            )
            for step, k, ck in points
        ],
    )


def make_statement(
    facts: dict[str, Any] | None = None,
    *,
    claim: str | None = None,
    deviations: Sequence[Deviation] = (),
    tier: str | None = None,
) -> ConformanceStatement:
    """A statement built like the example's, from other facts (the verdict is recomputed: V1)."""
    base = example_statement()
    facts = facts if facts is not None else example_facts()
    return build_statement(
        facts,
        claim=claim or base.claim,
        model=base.model,
        prereg=base.pre_registration.model_copy(update={"tau": facts["tau"], "phi": facts["phi"]}),
        pack=base.pack,
        assessor=base.assessor,
        manifest_ref=base.manifest_ref,
        assessed_on=base.assessment_date,
        versions=base.versions,
        target="pack example-c",
        deviations=deviations,
        tier=tier,
    )


def hidden_facts() -> dict[str, Any]:
    """Relearning brings the post-removal model to 40/50 while the control stays at 3/50: hidden (V1)."""
    facts = copy.deepcopy(example_facts())
    facts["attacks"][0].update(k=40, n=50, control_k=3, control_n=50)
    return facts


def collapsed_facts() -> dict[str, Any]:
    """Removal-stage utility 0.42 < φ = 0.9: utility-collapsed (R13)."""
    facts = copy.deepcopy(example_facts())
    facts["utility"] = {"removal_stage": 0.42, "attack_stage": 0.97}
    return facts


def near_tau_facts() -> dict[str, Any]:
    """Relearning at 40/100: its Wilson upper bound 0.4980 lies 0.002 under τ = 0.5 (an R25 margin case)."""
    facts = copy.deepcopy(example_facts())
    facts["attacks"][0].update(k=40, n=100, control_k=2, control_n=100)
    return facts


def bf16(rate_margin: float) -> PrecisionReduction:
    return PrecisionReduction(
        stage="scoring",
        description="bf16 forward passes",
        dtype="bf16",
        reference="fp32",
        rate_margin=rate_margin,
        utility_margin=0.0,
        basis="declared",
    )


def make_manifest(
    facts: dict[str, Any],
    *,
    claim: str = "The model no longer reproduces the installed target facts of pack example-c.",
    pack: PackRecord | None = None,
    curves: Sequence[RelearningCurve] = (),
    reductions: Sequence[PrecisionReduction] = (),
    run_id: str = "run-1",
) -> RunManifest:
    """A minimal manifest for ``facts`` (the assess tests exercise every field)."""
    return build_manifest(
        run_id=run_id,
        claim=claim,
        assessment_date=EXAMPLE_DATE,
        versions=Versions(standard="0.3", pack_schema="1.0", harness=__version__),
        facts=facts,
        models=[ModelRecord(role="control", name="tiny", source="fixture", identity=Absent(reason="test"))],
        seeds={"prereg": 1},
        hyperparameters={},
        components=[],
        pack=pack
        or PackRecord.model_validate(
            {
                "id": "example-c",
                "version": "1",
                "schema_version": "1.0",
                "class": "C",
                "seed": 0,
                "digest": "sha256:" + "1" * 64,
                "counts": {},
            }
        ),
        prereg=PreregRecord(
            digest="sha256:" + "0" * 64, registered_at="2026-05-20T09:00:00Z", values={"tau": 0.5}
        ),
        environment=capture_environment(device="cpu", dtype="float32"),
        config={},
        curves=curves,
        reductions=reductions,
    )
