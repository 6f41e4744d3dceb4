"""Seed 003's auditor tables for given model states: Base, A, I, M+I, M+I+A, GCG, SoftGCG, ActPert, by ROUGE-L.

Seed 003 reports, per model, the ROUGE-L recall of the unattacked model ("Base") and of each auditor: AOA (A),
ICL (I), MASK with ICL (M,I), with ICL and AOA (M,I,A), GCG, SoftGCG and ActPert — greedily (its Table 1), and as
the mean/max over 50 samples at T = 2, top-k 40 (its Table 2, which leaves out GCG and SoftGCG). This module
produces those tables for any list of model states (e.g. the pre-removal and the post-removal model: the seed
puts the pre-removal value in brackets beside each unlearned model), with κ beside ROUGE:

- each column is a registered attack (:data:`PAPER_COLUMNS`) or the unattacked question
  (:class:`~remnant.attacks.base.Unattacked`), recorded with its name, version and every parameter (K4, R23);
- every state gets the same attacks, probes, demonstrations, seeds and budgets (C-Q4);
- a cell is the mean over items of :mod:`remnant.attacks.rouge_scoring`'s per-item values.

The tables are non-adjudicating research output: they reproduce the seed's measurement, and no verdict reads them.

``remnant study auditors`` (:func:`run_auditors`) reads its inputs from a target pack: the scored items are the
free-text items of its ``probe`` split (seed 003's audit Q&A pairs; multiple-choice items are left out, since the
seed's ROUGE scoring is defined on free text); ICL's target demonstrations are the ``removal`` split's items on the
probed entities (what the removal was run on, so about the forgotten subjects, and never scored: R16 keeps them
apart from P); the ``retain`` split, where the pack has one, serves the retain-demonstration variants. Each
``--model`` is one row, labelled by its folder name. It writes ``auditors.json`` (every cell, every item, every
component's parameters) and ``auditors.md`` (the tables) into ``--out``, beside ``records.jsonl``: each (model,
column) cell runs through the one cell runner (:mod:`remnant.studies.run_cells`), so the same command again
computes only the cells not yet recorded.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field

from remnant.atomic import write_atomic
from remnant.attacks.base import Attack, AttackContext, Unattacked
from remnant.attacks.rouge_scoring import SamplingSpec, score_rouge, summarise
from remnant.errors import ConfigError
from remnant.models.prompts import PromptFormat
from remnant.score.probe import Probe
from remnant.studies.config import StudyModel
from remnant.studies.document import fmt

if TYPE_CHECKING:
    from remnant.engine.measurement import StateView
    from remnant.studies.run_cells import RowMeasurement


@dataclass(frozen=True)
class Column:
    """One column of the seed's tables: its label, the registered attack (None: unattacked) and parameters."""

    label: str
    attack: str | None
    params: Mapping[str, object] = field(default_factory=dict)
    sampled: bool = True  # in the seed's Table 2 (sampled decoding)

    def build(self) -> Attack:
        from remnant import registry

        if self.attack is None:
            return Unattacked()
        built: Attack = registry.create("attack", self.attack, dict(self.params))
        return built


#: The seed's columns, in its order; Table 2 leaves out GCG and SoftGCG.
PAPER_COLUMNS: tuple[Column, ...] = (
    Column("Base", None),
    Column("A", "aoa"),
    Column("I", "icl"),
    Column("M+I", "mask_icl"),
    Column("M+I+A", "mask_icl_aoa"),
    Column("GCG", "gcg", sampled=False),
    Column("SoftGCG", "soft_prompt", sampled=False),
    Column("ActPert", "actpert"),
)

#: Budgets small enough for the tiny test model (seconds): GCG and SoftGCG take 1–2 steps.
TINY_PARAMS: dict[str, dict[str, Any]] = {
    "icl": {"shots": 2},
    "mask_icl": {"shots": 2},
    "mask_icl_aoa": {"shots": 2},
    "gcg": {"suffix_len": 3, "steps": 1, "search_width": 4, "topk": 4, "batch_size": 4},
    "soft_prompt": {"n_tokens": 3, "steps": 2},
    "actpert": {"n_perturbations": 2},
}


@dataclass(frozen=True)
class AuditorSpec:
    """What the tables are computed with: columns, sampled decoding (None: greedy only), greedy length, seed."""

    columns: tuple[Column, ...] = PAPER_COLUMNS
    sampling: SamplingSpec | None = field(default_factory=SamplingSpec)
    max_new_tokens: int = 64
    seed: int = 0

    @classmethod
    def preset(cls, name: str, *, samples: int | None = None, seed: int = 0) -> AuditorSpec:
        """``paper``: the seed's decoding and every attack at its registered defaults; ``tiny``: test sizes.

        ``samples`` overrides the samples per item (0: greedy only); ``seed`` is the run seed.
        """
        if name == "paper":
            spec = cls(seed=seed)
        elif name == "tiny":
            cols = tuple(replace(c, params=TINY_PARAMS.get(c.attack or "", {})) for c in PAPER_COLUMNS)
            spec = cls(cols, SamplingSpec(n_samples=3, max_new_tokens=4), max_new_tokens=4, seed=seed)
        else:
            raise ConfigError(f"unknown auditor preset {name!r} (paper, tiny)", requirement="R23")
        if samples is not None and samples < 0:
            raise ConfigError(f"samples must be ≥ 0, not {samples}", requirement="R23")
        if samples == 0:
            return replace(spec, sampling=None)
        if samples is not None and spec.sampling is not None:
            return replace(spec, sampling=replace(spec.sampling, n_samples=samples))
        return spec


class Cell(StudyModel):
    """One state under one column: means over items, κ as k/n of the greedy generations, and the items."""

    label: str = Field(
        description="Column label as in seed 003 (Base, A, I, M+I, M+I+A, GCG, SoftGCG, ActPert)."
    )
    attack: dict[str, Any] = Field(description="The attack's name, version and every parameter (K4, R23).")
    n: int = Field(description="Items scored.")
    rouge_greedy: float | None = Field(description="Mean greedy ROUGE-L recall (seed 003 Table 1).")
    rouge_sampled_mean: float | None = Field(
        description="Mean over items of the per-item sample mean (Table 2)."
    )
    rouge_sampled_max: float | None = Field(
        description="Mean over items of the per-item sample max (Table 2)."
    )
    kappa_k: int = Field(description="Items whose greedy generation contains an accepted answer (κ, R6).")
    seconds: float = Field(description="Wall time of the cell.")
    items: list[dict[str, Any]] = Field(description="Per-item values (rouge_scoring.RougeItem.to_dict).")


class StateRow(StudyModel):
    """One model state's row: its label and source, and a cell per column."""

    state: str = Field(description="The state's label (e.g. pre-removal, post-removal, a folder name).")
    source: str = Field(description="Where the state was loaded from.")
    cells: dict[str, Cell] = Field(description="Cells by column label.")


class AuditorTable(StudyModel):
    """Seed 003's auditor tables for a list of model states (non-adjudicating)."""

    columns: list[str] = Field(description="Column labels, in the seed's order.")
    sampled_columns: list[str] = Field(description="Columns scored with sampled decoding (seed 003 Table 2).")
    sampling: dict[str, Any] | None = Field(
        description="Sampled decoding (T, top-k, samples, length) or None."
    )
    max_new_tokens: int = Field(description="Greedy generation length in tokens.")
    seed: int = Field(description="Run seed every generator is derived from.")
    probes: list[str] = Field(description="Item ids scored, in order.")
    target_demonstrations: list[str] = Field(
        description="Item ids ICL could draw target demonstrations from."
    )
    rows: list[StateRow] = Field(description="One row per model state, in the order given.")


def _column_cells(
    states: Mapping[str, tuple[Any, Any]],
    probes: Sequence[Probe],
    spec: AuditorSpec,
    demonstrations: tuple[Sequence[Probe], Sequence[Probe]],
    digests: Mapping[str, str],
    log: Callable[[str], None] | None,
) -> Iterator[tuple[RowMeasurement, StateView]]:
    """Every (state, column) as one engine cell on that state (:mod:`remnant.studies.run_cells`), in row order:
    its key hashes the column's attack, the probes and demonstrations, the decoding and the state's identity
    (weights and chat template), so the same folder given twice is measured once (C-Q4)."""
    from dataclasses import asdict

    from remnant.engine.measurement import StateView
    from remnant.studies.run_cells import RowMeasurement

    target, retain = demonstrations
    inputs = {
        "probes": [asdict(p) for p in probes],
        "target_demonstrations": [asdict(p) for p in target],
        "retain": [asdict(p) for p in retain],
        "max_new_tokens": spec.max_new_tokens,
        "seed": spec.seed,
    }
    # each column's attack, name, version and parameters: the same on every state (C-Q4)
    components = {col.label: col.build().describe() for col in spec.columns}
    for label, (model, tok) in states.items():
        ctx = AttackContext(
            model=model,
            tokenizer=tok,
            fmt=PromptFormat.for_tokenizer(tok),
            seed=spec.seed,
            demonstrations=tuple(retain),
            max_new_tokens=spec.max_new_tokens,
            target_demonstrations=tuple(target),
        )
        for col in spec.columns:

            def row(col: Column = col, ctx: AttackContext = ctx) -> tuple[float | None, str]:
                attack = col.build()
                start = time.perf_counter()
                items = score_rouge(attack, ctx, probes, sampling=spec.sampling if col.sampled else None)
                seconds = time.perf_counter() - start
                summary = summarise(items)
                cell = Cell(
                    label=col.label,
                    attack=attack.describe(),
                    n=summary["n"],
                    rouge_greedy=summary["rouge_greedy"],
                    rouge_sampled_mean=summary["rouge_sampled_mean"],
                    rouge_sampled_max=summary["rouge_sampled_max"],
                    kappa_k=summary["kappa_k"],
                    seconds=seconds,
                    items=[i.to_dict() for i in items],
                )
                if log is not None:
                    log(f"{col.label}: ROUGE-L greedy {fmt(cell.rouge_greedy)} ({cell.seconds:.1f}s)")
                return cell.rouge_greedy, cell.model_dump_json()

            sampling = spec.sampling.to_dict() if col.sampled and spec.sampling is not None else None
            key = {**inputs, "column": col.label, "sampling": sampling}
            measurement = RowMeasurement(
                "auditors", components[col.label], key, f"{col.label} on {label}", row
            )
            yield measurement, StateView("post_removal", digests[label])


def auditor_table(
    states: Mapping[str, tuple[Any, Any]],
    probes: Sequence[Probe],
    *,
    spec: AuditorSpec | None = None,
    target_demonstrations: Sequence[Probe] = (),
    retain: Sequence[Probe] = (),
    sources: Mapping[str, str] | None = None,
    log: Callable[[str], None] | None = None,
    digests: Mapping[str, str] | None = None,
    records: Path | None = None,
) -> AuditorTable:
    """The tables for ``states`` (label → (model, tokenizer), in row order) on ``probes``.

    ``target_demonstrations`` are ICL's items about the target (unscored; default: the other probes);
    ``retain`` the retain items (only retain-demonstration variants use them). Each (state, column) cell runs
    through the one cell runner into ``records`` (a records file, appended to; None: memory only), so a rerun
    into the same folder computes only the cells not recorded. ``digests``: each state's identity digest, where
    the caller has it (else it is computed from the weights and chat template).
    """
    from remnant.models.identity import identify_in_memory
    from remnant.studies.run_cells import record_cells, run_results

    spec = spec or AuditorSpec()
    ids = dict(digests or {})
    for label, (model, tok) in states.items():
        ids.setdefault(label, identify_in_memory(model, tok).digest)
    found = _column_cells(states, probes, spec, (target_demonstrations, retain), ids, log)
    cells = iter(run_results(*record_cells(found, records, "auditors", log), Cell.model_validate_json))
    rows = [
        StateRow(
            state=label,
            source=(sources or {}).get(label, label),
            cells={col.label: next(cells) for col in spec.columns},
        )
        for label in states
    ]
    return AuditorTable(
        columns=[c.label for c in spec.columns],
        sampled_columns=[c.label for c in spec.columns if c.sampled and spec.sampling is not None],
        sampling=spec.sampling.to_dict() if spec.sampling is not None else None,
        max_new_tokens=spec.max_new_tokens,
        seed=spec.seed,
        probes=[p.item_id for p in probes],
        target_demonstrations=[p.item_id for p in target_demonstrations],
        rows=rows,
    )


def render_markdown(table: AuditorTable) -> str:
    """The seed's two tables (greedy; sampled mean/max), κ beside them, and the components that ran."""
    cols, sampled = table.columns, table.sampled_columns
    n = len(table.probes)

    def states(columns: list[str], value: Callable[[Cell], str]) -> list[str]:
        """One row per state, one cell per column of ``columns``."""
        rows = [f"| {r.state} | " + " | ".join(value(r.cells[c]) for c in columns) + " |" for r in table.rows]
        return ["| Model | " + " | ".join(columns) + " |", "|---|" + "---|" * len(columns), *rows]

    lines = [
        "# Seed 003 auditors: ROUGE-L recall (non-adjudicating)",
        "",
        f"{n} probe items; seed {table.seed}; greedy generations of at most {table.max_new_tokens} new tokens.",
        "",
        "## Greedy decoding (seed 003 Table 1)",
        "",
        *states(cols, lambda c: fmt(c.rouge_greedy)),
    ]
    if sampled and table.sampling is not None:
        s = table.sampling
        lines += [
            "",
            f"## Sampled decoding, mean/max over {s['n_samples']} samples (seed 003 Table 2: T = "
            f"{s['temperature']:g}, top-k {s['top_k']}, at most {s['max_new_tokens']} new tokens)",
            "",
            *states(sampled, lambda c: f"{fmt(c.rouge_sampled_mean)}/{fmt(c.rouge_sampled_max)}"),
        ]
    lines += [
        "",
        "## κ of the greedy generation (items whose answer contains an accepted answer, k/n)",
        "",
        *states(cols, lambda c: f"{c.kappa_k}/{c.n}"),
    ]
    lines += ["", "## Components", "", "| Column | Attack | Version | Parameters |", "|---|---|---|---|"]
    if table.rows:
        for c in cols:
            a = table.rows[0].cells[c].attack
            params = ", ".join(f"{k}={v}" for k, v in sorted(a.get("params", {}).items())) or "—"
            lines.append(f"| {c} | {a['name']} | {a['version']} | {params} |")
    lines += ["", "Sources: " + "; ".join(f"{r.state} = {r.source}" for r in table.rows)]
    return "\n".join(lines) + "\n"


#: The Standard's requirement this study's inputs and outputs answer to: the same attacks on every state.
REQUIREMENT = "C-Q4"


def pack_inputs(
    pack_dir: str | Path, max_items: int | None = None
) -> tuple[list[Probe], list[Probe], list[Probe]]:
    """Probes (free text of P), target demonstrations (removal items on the probed entities), retain items."""
    from remnant.packs import load_pack
    from remnant.score.probe import probes_from_pack

    if max_items is not None and max_items < 1:
        raise ConfigError(f"--max-items must be ≥ 1, not {max_items}", requirement=REQUIREMENT)
    pack = load_pack(pack_dir)
    probes = [p for p in probes_from_pack(pack, "probe") if not p.options]
    if max_items is not None:
        probes = probes[:max_items]
    if not probes:
        raise ConfigError(f"pack {pack_dir}: no free-text items in the probe split", requirement="R16")
    entities = {p.entity for p in probes if p.entity}
    splits = pack.manifest.splits
    removal = probes_from_pack(pack, "removal") if "removal" in splits else []
    target = [d for d in removal if d.entity in entities and not d.options]
    retain = probes_from_pack(pack, "retain") if "retain" in splits else []
    return probes, target, retain


def _labels(models: Sequence[str]) -> list[str]:
    labels: list[str] = []
    for m in models:
        base = Path(m).name or m
        label, k = base, 2
        while label in labels:
            label, k = f"{base}#{k}", k + 1
        labels.append(label)
    return labels


def run_auditors(
    models: Sequence[str],
    pack_dir: str | Path,
    out: str | Path,
    *,
    spec: AuditorSpec,
    max_items: int | None = None,
    log: Callable[[str], None] | None = None,
) -> tuple[AuditorTable, str]:
    """Run the study and write ``auditors.json`` and ``auditors.md`` into ``out``; returns the table and text."""
    from remnant.cli_paths import out_folder
    from remnant.models import load_model
    from remnant.studies.run_cells import recording

    inputs = {"the pack folder": pack_dir, **{f"the model {m}": m for m in models}}
    out_dir = out_folder(out, requirement=REQUIREMENT, kind="study", inputs=inputs)  # before any model work
    if not models:
        raise ConfigError("study auditors: give at least one --model", requirement=REQUIREMENT)
    probes, target, retain = pack_inputs(pack_dir, max_items)
    states: dict[str, tuple[Any, Any]] = {}
    sources: dict[str, str] = {}
    digests: dict[str, str] = {}
    for label, source in zip(_labels(models), models, strict=True):
        state = load_model(source)
        states[label], sources[label] = (state.model, state.tokenizer), str(source)
        digests[label] = state.identity.digest
    with recording(out_dir, "auditors") as records:
        table = auditor_table(
            states,
            probes,
            spec=spec,
            target_demonstrations=target,
            retain=retain,
            sources=sources,
            log=log,
            digests=digests,
            records=records,
        )
        text = render_markdown(table)
        write_atomic(out_dir / "auditors.json", table.model_dump_json(indent=1))
        write_atomic(out_dir / "auditors.md", text)
    return table, text


__all__ = [
    "PAPER_COLUMNS",
    "REQUIREMENT",
    "TINY_PARAMS",
    "AuditorSpec",
    "AuditorTable",
    "Cell",
    "Column",
    "StateRow",
    "auditor_table",
    "pack_inputs",
    "render_markdown",
    "run_auditors",
]
