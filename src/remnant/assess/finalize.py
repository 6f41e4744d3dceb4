"""Records → facts → verdict → tier → manifest → statement → signature → reports, from the run folder alone.

``remnant assess`` ends here and ``remnant recompute RUN`` is only this: it reads ``records.jsonl``,
``prereg.json``, ``deviations.jsonl`` and the config copy, loads no model (no torch import), and writes the same
statement bytes (DESIGN §1; the signature and timestamps aside). The order is the one R23 and K4 need: the
manifest is written first and the statement cites its sha256 (``manifest_ref``); then the statement, its DSSE
envelope when a key is configured (K5), and both reports (the customer one with canaries redacted, R18). Both the
manifest (``records``) and the statement (``records_head``) pin the chain head of ``records.jsonl`` read here
(:mod:`remnant.records`); records written before the chain are pinned as *not chained*, and the statement says so.

The statement's ``latent`` block comes from the run's reading records alone
(:func:`remnant.statement.latent.block_from_readings`): white-box audits are supplementary, and nothing here
passes a reading to the facts, the verdict or the tier (C-H6, C-H7).

Every file is written atomically, so an interrupted finalize leaves the previous complete file or none.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from remnant import HARNESS_VERSION, STANDARD_VERSION
from remnant.assess import facts as F
from remnant.assess.runfiles import (
    CONFIG_COPY,
    PACK_DIR,
    cell_records,
    json_bytes,
    read_context,
    store,
)
from remnant.atomic import write_atomic
from remnant.config import AssessmentConfig, parse_config
from remnant.errors import ConfigError, RecordError
from remnant.jsonio import read_toml
from remnant.models.identity import ModelIdentity as StateIdentity
from remnant.packs.schema import PACK_SCHEMA_VERSION
from remnant.prereg import PREREG_FILE, check_against, deviations_for_statement, load_deviations, load_prereg
from remnant.records import RECORDS_FILE, ChainState, Reading
from remnant.run_manifest import (
    MANIFEST_FILE,
    ComponentRecord,
    Environment,
    ModelRecord,
    PackRecord,
    PrecisionReduction,
    PreregRecord,
    RecordsChain,
    build_manifest,
    write_manifest,
)
from remnant.standard.facts import VerdictFacts
from remnant.standard.tier import TierAward, award_tier
from remnant.standard.verdict import VerdictResult, decide
from remnant.statement.absent import Absent
from remnant.statement.build import build_statement
from remnant.statement.latent import block_from_readings
from remnant.statement.schema import (
    Assessor,
    ConformanceStatement,
    Deviation,
    FormatCheck,
    ModelIdentity,
    PackRef,
    PreRegistration,
    Versions,
)

STATEMENT_FILE = "statement.json"
ENVELOPE_FILE = "statement.dsse.json"
REPORT_FILE = "report.html"
CUSTOMER_FILE = "report-customer.html"

ASSESSOR = Assessor(
    identity=f"remnant {HARNESS_VERSION} (automated assessment run by the operator of this run folder)",
    independence="Not declared: run by the claimant's or assessor's operator; no independence declaration (K8a).",
    accredited=False,
)


@dataclass(frozen=True)
class Outcome:
    """What a finalize wrote and decided."""

    statement: ConformanceStatement
    verdict: VerdictResult
    tier: TierAward
    facts: dict[str, Any]
    manifest_ref: str
    files: tuple[Path, ...]


def load_run_config(run_dir: Path) -> AssessmentConfig:
    """The config copy in RUN, with paths resolved against the folder the original config lived in."""
    path = run_dir / CONFIG_COPY
    if not path.is_file():
        raise ConfigError(f"{path}: missing; is {run_dir} a run folder written by `remnant assess`?")
    context = read_context(store(run_dir).read())
    base = Path(context.get("assessment", {}).get("config_dir") or run_dir)
    raw = read_toml(path)
    return parse_config(raw, source=str(path), base_dir=base)


def _identity(entry: dict[str, Any] | None) -> StateIdentity | Absent:
    if not entry or not entry.get("identity"):
        return Absent(reason="state not built in this run")
    return StateIdentity.model_validate(entry["identity"])


def _model_records(states: dict[str, Any]) -> list[ModelRecord]:
    out = []
    for role in (F.CONTROL, F.PRE, F.POST):
        entry = states.get(role)
        if entry is None:
            continue
        out.append(
            ModelRecord(
                role=role,
                name=str(entry.get("name", role)),
                source=str(entry.get("source", "")),
                identity=_identity(entry),
            )
        )
    return out


def _digest_of(entry: dict[str, Any] | None) -> str:
    ident = (entry or {}).get("identity") or {}
    return "sha256:" + str(ident.get("digest", "unknown"))


#: Statement fields that pin this run's records and manifest. The records carry event timestamps, and a resumed run
#: carries its resume events, so two runs of one config and seed differ here and nowhere else (DESIGN §1).
PIN_FIELDS = ("manifest_ref", "records_head")


def without_pins(statement: dict[str, Any]) -> dict[str, Any]:
    """A statement's JSON without :data:`PIN_FIELDS`: what a resumed run must reproduce byte for byte."""
    return {k: v for k, v in statement.items() if k not in PIN_FIELDS}


def records_head(chain: ChainState) -> str | Absent:
    """The statement's ``records_head``: the chain head, or absent saying the records are not chained (R23)."""
    if chain.chained and chain.head is not None:
        return f"sha256:{chain.head}"
    if chain.head is None:
        return Absent(reason=f"records not chained: {RECORDS_FILE} is empty")
    return Absent(
        reason=f"records not chained: lines 1-{chain.unchained} of the {chain.lines} in {RECORDS_FILE} were "
        "written before remnant chained its records, so an edit, insertion or deletion there would not show; "
        f"the manifest pins only the digest of the last line (R23)"
    )


def _file_sha(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def finalize(
    run_dir: str | Path,
    cfg: AssessmentConfig | None = None,
    *,
    reports: bool = True,
) -> Outcome:
    """Build and write manifest, statement, envelope (if ``signing.key``) and reports from the run's records."""
    run = Path(run_dir)
    cfg = cfg if cfg is not None else load_run_config(run)
    records, chain = store(run).read_chain()
    context = read_context(records)
    missing = [k for k in ("assessment", "pack", "states") if k not in context]
    if missing:
        raise RecordError(
            f"{run / 'records.jsonl'}: no {', '.join(missing)} context: the run never got that far"
        )
    pack_ctx = context["pack"]
    prereg = load_prereg(run)
    deviations = check_against(
        cfg,
        prereg,
        load_deviations(run),
        pack_digest=pack_ctx["digest"] if cfg.target.pack is not None else None,
    )
    cells = cell_records(records)
    chance = pack_ctx.get("chance_rate")
    facts = F.build_facts(cfg, cells, chance_rate=chance)
    verdict = decide(VerdictFacts.model_validate(facts))
    tier = award_tier(
        F.evidence(
            cfg,
            facts,
            verdict.verdict,
            deviations=len(deviations),
            minted_canaries=bool(pack_ctx.get("minted_canaries")),
            public_fixture=bool(pack_ctx.get("publicly_released")),
        )
    )
    extra = F.extra_cells(cfg, cells, chance_rate=chance)
    statement_deviations = [Deviation.model_validate(d) for d in deviations_for_statement(deviations)]
    versions = Versions(standard=STANDARD_VERSION, pack_schema=PACK_SCHEMA_VERSION, harness=HARNESS_VERSION)
    assessment = context["assessment"]
    date = dt.date.fromisoformat(str(assessment["date"]))
    states = context["states"]
    artifacts = {name: _file_sha(run / name) for name in (PREREG_FILE, CONFIG_COPY) if (run / name).is_file()}
    manifest = build_manifest(
        run_id=str(assessment["run_id"]),
        claim=cfg.claim.statement,
        assessment_date=date,
        versions=versions,
        facts=facts,
        models=_model_records(states),
        seeds={str(k): int(v) for k, v in context.get("seeds", {}).items()} or {"master": cfg.seeds.master},
        hyperparameters=context.get("hyperparameters", {}),
        components=[ComponentRecord.model_validate(c) for c in context.get("components", {}).get("list", [])],
        pack=PackRecord.model_validate(pack_ctx["record"]),
        prereg=PreregRecord(digest=prereg.digest, registered_at=prereg.registered_at, values=prereg.values),
        environment=Environment.model_validate(context["environment"]),
        config=cfg.model_dump(mode="json", by_alias=True),
        deviations=statement_deviations,
        extra_cells=extra,
        curves=F.curves(cfg, cells, chance_rate=chance),
        reductions=[
            PrecisionReduction.model_validate(r) for r in context.get("precision", {}).get("list", [])
        ],
        commands=[
            f"remnant preregister {CONFIG_COPY} --out RUN",
            f"remnant assess {CONFIG_COPY} --out RUN",
            "remnant recompute RUN",
        ],
        artifacts=artifacts,
        records=RecordsChain.of(chain),
    )
    ref = write_manifest(manifest, run / MANIFEST_FILE)
    post, control = states.get(F.POST), states.get(F.CONTROL)
    statement = build_statement(
        facts,
        claim=cfg.claim.statement,
        model=ModelIdentity(
            identity=f"{cfg.claim.model}; post-removal weights {_digest_of(post)}",
            version=cfg.claim.model,
            control_identity=f"{(control or {}).get('name', 'control')}; weights {_digest_of(control)}"
            if control
            else Absent(reason="control not built"),
        ),
        prereg=PreRegistration.model_validate(prereg.statement_fields()),
        pack=PackRef(
            identity=f"{pack_ctx['record']['id']} {pack_ctx['digest']}", version=pack_ctx["record"]["version"]
        ),
        assessor=ASSESSOR,
        manifest_ref=ref,
        records_head=records_head(chain),
        assessed_on=date,
        versions=versions,
        target=cfg.claim.target,
        deviations=statement_deviations,
        extra_cells=extra,
        tier=tier,
        latent=block_from_readings(r for r in records if isinstance(r, Reading)),
    )
    statement = statement.model_copy(
        update={"format_checks": [FormatCheck.model_validate(c) for c in F.format_checks(cfg, cells)]}
    )
    if cfg.claim_class == "D":
        # The builder's default reason speaks of Class C; say what is true here (K6).
        statement = statement.model_copy(
            update={"class_d": class_d_block(facts, context.get("class_d", {}).get("design"))}
        )
    written = [run / MANIFEST_FILE]
    statement_json = statement.model_dump(mode="json", by_alias=True)
    write_atomic(run / STATEMENT_FILE, json_bytes(statement_json))
    written.append(run / STATEMENT_FILE)
    if cfg.signing.key is not None:
        from remnant.statement.dsse import sign_statement
        from remnant.statement.keys import load_private_key

        envelope = sign_statement(
            statement_json, load_private_key(cfg.resolve(cfg.signing.key)), name=STATEMENT_FILE
        )
        write_atomic(run / ENVELOPE_FILE, json_bytes(envelope))
        written.append(run / ENVELOPE_FILE)
    if reports:
        written += write_reports(run)
    return Outcome(statement, verdict, tier, facts, ref, tuple(written))


def class_d_block(facts: dict[str, Any], design: dict[str, Any] | None) -> Any:
    """The statement's ``class_d`` block from the verdict facts: the D-5.1 bar over the admitted risk-tagged
    measurements, each risk's deciding rate with its interval net of control, the threshold, its justification
    (D-5.2) and the canary design (D5); an absent marker saying why when the battery did not measure all three."""
    from remnant.classd.bar import bar_from_facts

    if not any(a.get("risk") for a in facts["attacks"]):
        return Absent(reason="Class D battery (singling out, linkability, inference) not run")
    if not facts.get("insignificance"):
        return Absent(reason="no insignificance threshold declared (D-5.1)")
    bar = bar_from_facts(facts)
    try:
        return bar.statement_block(design)
    except ValueError as exc:
        return Absent(reason=f"Class D battery incomplete: {exc}")


def write_reports(run: Path) -> list[Path]:
    """The technical report and the customer register (canaries redacted against the run's pack, R18)."""
    from remnant.report.runs import report_runs

    packs = [run / PACK_DIR] if (run / PACK_DIR / "pack.json").is_file() else []
    return [report_runs([run]), report_runs([run], customer=True, packs=packs)]


__all__ = [
    "CUSTOMER_FILE",
    "PIN_FIELDS",
    "class_d_block",
    "ENVELOPE_FILE",
    "REPORT_FILE",
    "STATEMENT_FILE",
    "Outcome",
    "finalize",
    "load_run_config",
    "records_head",
    "without_pins",
    "write_reports",
]
