"""Records → facts → verdict → tier → manifest → statement → signature → reports, from the run folder alone.

``remnant assess`` ends here and ``remnant recompute RUN`` is only this: it reads ``records.jsonl``,
``prereg.json``, ``deviations.jsonl`` and the config copy, loads no model (no torch import), and writes the same
statement bytes (the signature and timestamps aside; R24). The order is the one R23 and K4 need: the
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from remnant import HARNESS_VERSION, STANDARD_VERSION
from remnant.assess import facts as F
from remnant.assess.runfiles import (
    PACK_DIR,
    cell_records,
    read_context,
    store,
)
from remnant.atomic import write_json
from remnant.config import AssessmentConfig, parse_config
from remnant.errors import ConfigError, RecordError
from remnant.jsonio import read_toml
from remnant.models.identity import ModelIdentity as StateIdentity
from remnant.packs.schema import PACK_SCHEMA_VERSION
from remnant.prereg import (
    PREREG_FILE,
    check_against,
    deviations_for_statement,
    load_deviations,
    load_prereg,
)
from remnant.prereg import PreRegistration as FrozenPrereg
from remnant.records import RECORDS_FILE, AnyRecord, CellRecord, ChainState, Reading
from remnant.records import Deviation as DeviationRecord
from remnant.run_manifest import (
    CONFIG_COPY,
    ENVELOPE_FILE,
    MANIFEST_FILE,
    STATEMENT_FILE,
    ComponentRecord,
    Environment,
    ModelRecord,
    PackRecord,
    PrecisionReduction,
    PreregRecord,
    RecordsChain,
    RunManifest,
    build_manifest,
    file_ref,
    write_manifest,
)
from remnant.standard.facts import VerdictFacts
from remnant.standard.tier import TierAward, award_tier
from remnant.standard.verdict import VerdictResult, decide
from remnant.standard.vocabulary import CONTROL, POST, PRE
from remnant.statement.absent import Absent
from remnant.statement.build import build_statement
from remnant.statement.latent import block_from_readings
from remnant.statement.schema import (
    Assessor,
    Cell,
    ConformanceStatement,
    Deviation,
    FormatCheck,
    ModelIdentity,
    PackRef,
    PreRegistration,
    Versions,
)

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


def _identity(entry: dict[str, object] | None) -> StateIdentity | Absent:
    if not entry or not entry.get("identity"):
        return Absent(reason="state not built in this run")
    return StateIdentity.model_validate(entry["identity"])


def _model_records(states: dict[str, Any]) -> list[ModelRecord]:
    out = []
    for role in (CONTROL, PRE, POST):
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
#: carries its resume events, so two runs of one config and seed differ here and nowhere else (R24).
PIN_FIELDS = ("manifest_ref", "records_head")


def without_pins(statement: dict[str, object]) -> dict[str, object]:
    """A statement's JSON without :data:`PIN_FIELDS`: what a resumed run must reproduce byte for byte."""
    return {k: v for k, v in statement.items() if k not in PIN_FIELDS}


def records_head(chain: ChainState) -> str | Absent:
    """The statement's ``records_head``: the chain head, or absent saying the records are not chained (R23)."""
    if chain.chained and chain.head_ref is not None:
        return chain.head_ref
    if chain.head is None:
        return Absent(reason=f"records not chained: {RECORDS_FILE} is empty")
    return Absent(
        reason=f"records not chained: lines 1-{chain.unchained} of the {chain.lines} in {RECORDS_FILE} were "
        "written before remnant chained its records, so an edit, insertion or deletion there would not show; "
        f"the manifest pins only the digest of the last line (R23)"
    )


@dataclass(frozen=True)
class RunRecords:
    """What finalize reads from a run folder: the records and their chain state, the context entries, the
    pre-registration, the deviations in force (R15) and the cell records."""

    records: list[AnyRecord]
    chain: ChainState
    context: dict[str, Any]
    prereg: FrozenPrereg
    deviations: list[DeviationRecord]
    cells: list[CellRecord]

    @property
    def pack(self) -> dict[str, Any]:
        pack: dict[str, Any] = self.context["pack"]
        return pack


@dataclass(frozen=True)
class Decision:
    """The verdict facts and what is decided from them: verdict (V1, V1a), tier, the extra cells and the
    deviations as the statement prints them."""

    facts: dict[str, Any]
    verdict: VerdictResult
    tier: TierAward
    extra: list[Cell]
    deviations: list[Deviation]
    versions: Versions
    date: dt.date


def read_run(run: Path, cfg: AssessmentConfig) -> RunRecords:
    """The run's records, held to its pre-registration (R14, R15); a run that never recorded its assessment,
    pack and states context is refused."""
    records, chain = store(run).read_chain()
    context = read_context(records)
    missing = [k for k in ("assessment", "pack", "states") if k not in context]
    if missing:
        raise RecordError(
            f"{run / 'records.jsonl'}: no {', '.join(missing)} context: the run never got that far"
        )
    prereg = load_prereg(run)
    deviations = check_against(
        cfg,
        prereg,
        load_deviations(run),
        pack_digest=context["pack"]["digest"] if cfg.target.pack is not None else None,
    )
    return RunRecords(records, chain, context, prereg, deviations, cell_records(records))


def decide_run(cfg: AssessmentConfig, read: RunRecords) -> Decision:
    """Facts from the cell records and the pre-removal state's installation record (R2), then the verdict (V1,
    V1a) and the tier from the facts alone."""
    pack_ctx = read.pack
    chance = pack_ctx.get("chance_rate")
    installation = F.installation_fact(cfg, read.context["states"].get(PRE))
    facts = F.build_facts(cfg, read.cells, chance_rate=chance, installation=installation)
    verdict = decide(VerdictFacts.model_validate(facts))
    tier = award_tier(
        F.evidence(
            cfg,
            facts,
            verdict.verdict,
            deviations=len(read.deviations),
            minted_canaries=bool(pack_ctx.get("minted_canaries")),
            public_fixture=bool(pack_ctx.get("publicly_released")),
        )
    )
    return Decision(
        facts=facts,
        verdict=verdict,
        tier=tier,
        extra=F.extra_cells(cfg, read.cells, chance_rate=chance),
        deviations=[Deviation.model_validate(d) for d in deviations_for_statement(read.deviations)],
        versions=Versions(
            standard=STANDARD_VERSION, pack_schema=PACK_SCHEMA_VERSION, harness=HARNESS_VERSION
        ),
        date=dt.date.fromisoformat(str(read.context["assessment"]["date"])),
    )


def run_manifest(cfg: AssessmentConfig, run: Path, read: RunRecords, decision: Decision) -> RunManifest:
    """The run manifest (R23-R25): everything an independent assessor needs to repeat the assessment."""
    context = read.context
    artifacts = {name: file_ref(run / name) for name in (PREREG_FILE, CONFIG_COPY) if (run / name).is_file()}
    chance = read.pack.get("chance_rate")
    return build_manifest(
        run_id=str(context["assessment"]["run_id"]),
        claim=cfg.claim.statement,
        assessment_date=decision.date,
        versions=decision.versions,
        facts=decision.facts,
        models=_model_records(context["states"]),
        seeds={str(k): int(v) for k, v in context.get("seeds", {}).items()} or {"master": cfg.seeds.master},
        hyperparameters=context.get("hyperparameters", {}),
        components=[ComponentRecord.model_validate(c) for c in context.get("components", {}).get("list", [])],
        pack=PackRecord.model_validate(read.pack["record"]),
        prereg=PreregRecord(
            digest=read.prereg.digest, registered_at=read.prereg.registered_at, values=read.prereg.values
        ),
        environment=Environment.model_validate(context["environment"]),
        config=cfg.model_dump(mode="json", by_alias=True),
        deviations=decision.deviations,
        extra_cells=decision.extra,
        curves=F.curves(cfg, read.cells, chance_rate=chance),
        reductions=[
            PrecisionReduction.model_validate(r) for r in context.get("precision", {}).get("list", [])
        ],
        commands=[
            f"remnant preregister {CONFIG_COPY} --out RUN",
            f"remnant assess {CONFIG_COPY} --out RUN",
            "remnant recompute RUN",
        ],
        artifacts=artifacts,
        records=RecordsChain.of(read.chain),
    )


def run_statement(
    cfg: AssessmentConfig, read: RunRecords, decision: Decision, manifest_ref: str
) -> ConformanceStatement:
    """The conformance statement (K4, K6), citing the manifest's sha256 and the records' chain head (R23)."""
    states, pack_ctx = read.context["states"], read.pack
    post, control = states.get(POST), states.get(CONTROL)
    statement = build_statement(
        decision.facts,
        claim=cfg.claim.statement,
        model=ModelIdentity(
            identity=f"{cfg.claim.model}; post-removal weights {_digest_of(post)}",
            version=cfg.claim.model,
            control_identity=f"{(control or {}).get('name', 'control')}; weights {_digest_of(control)}"
            if control
            else Absent(reason="control not built"),
        ),
        prereg=PreRegistration.model_validate(read.prereg.statement_fields()),
        pack=PackRef(
            identity=f"{pack_ctx['record']['id']} {pack_ctx['digest']}", version=pack_ctx["record"]["version"]
        ),
        assessor=ASSESSOR,
        manifest_ref=manifest_ref,
        records_head=records_head(read.chain),
        assessed_on=decision.date,
        versions=decision.versions,
        target=cfg.claim.target,
        deviations=decision.deviations,
        extra_cells=decision.extra,
        tier=decision.tier,
        latent=block_from_readings(r for r in read.records if isinstance(r, Reading)),
    )
    statement = statement.model_copy(
        update={
            "format_checks": [
                FormatCheck.model_validate(c)
                for c in F.format_checks(cfg, read.cells, decision.facts.get("installation"))
            ]
        }
    )
    if cfg.claim_class == "D":
        # The builder's default reason speaks of Class C; say what is true here (K6).
        design = read.context.get("class_d", {}).get("design")
        statement = statement.model_copy(update={"class_d": class_d_block(decision.facts, design)})
    return statement


def write_statement(run: Path, cfg: AssessmentConfig, statement: ConformanceStatement) -> list[Path]:
    """The statement, and its DSSE envelope when ``signing.key`` is set (K5); returns the files written."""
    statement_json = statement.model_dump(mode="json", by_alias=True)
    write_json(run / STATEMENT_FILE, statement_json)
    written = [run / STATEMENT_FILE]
    if cfg.signing.key is not None:
        from remnant.statement.dsse import sign_statement
        from remnant.statement.keys import load_private_key

        envelope = sign_statement(
            statement_json, load_private_key(cfg.resolve(cfg.signing.key)), name=STATEMENT_FILE
        )
        write_json(run / ENVELOPE_FILE, envelope)
        written.append(run / ENVELOPE_FILE)
    return written


def finalize(
    run_dir: str | Path,
    cfg: AssessmentConfig | None = None,
    *,
    reports: bool = True,
) -> Outcome:
    """Build and write manifest, statement, envelope (if ``signing.key``) and reports from the run's records,
    in the order of the module docstring."""
    run = Path(run_dir)
    cfg = cfg if cfg is not None else load_run_config(run)
    read = read_run(run, cfg)
    decision = decide_run(cfg, read)
    ref = write_manifest(run_manifest(cfg, run, read, decision), run / MANIFEST_FILE)
    statement = run_statement(cfg, read, decision, ref)
    written = [run / MANIFEST_FILE, *write_statement(run, cfg, statement)]
    if reports:
        written += write_reports(run)
    return Outcome(statement, decision.verdict, decision.tier, decision.facts, ref, tuple(written))


def class_d_block(facts: dict[str, Any], design: dict[str, Any] | None) -> Any:
    """The statement's ``class_d`` block from the verdict facts: the D-5.1 bar over the admitted risk-tagged
    measurements, each risk's deciding rate with its interval net of control, the threshold, its justification
    (D-5.2) and the canary design (D5); an absent marker saying why when the battery did not measure all three."""
    from remnant.statement.classd_bar import bar_from_facts

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
    "PIN_FIELDS",
    "class_d_block",
    "Decision",
    "Outcome",
    "RunRecords",
    "decide_run",
    "finalize",
    "load_run_config",
    "read_run",
    "records_head",
    "run_manifest",
    "run_statement",
    "without_pins",
    "write_reports",
    "write_statement",
]
