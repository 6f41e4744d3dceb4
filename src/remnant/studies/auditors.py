"""``remnant study auditors``: seed 003's auditor tables for model folders on a target pack, as Markdown and JSON.

Inputs, read from the pack: the scored items are the free-text items of its ``probe`` split (seed 003's audit
Q&A pairs; multiple-choice items are left out, since the seed's ROUGE scoring is defined on free text); ICL's
target demonstrations are the ``removal`` split's items on the probed entities (what the removal was run on, so
about the forgotten subjects, and never scored: R16 keeps them apart from P); the ``retain`` split, where the
pack has one, serves the retain-demonstration variants. Each ``--model`` is one row, labelled by its folder name.

Writes ``auditors.json`` (every cell, every item, every component's parameters) and ``auditors.md`` (the tables)
into ``--out``, beside ``records.jsonl``: each (model, column) cell runs through the one cell runner
(:mod:`remnant.studies.run_cells`), so the same command again computes only the cells not yet recorded. Exit 0 when the study ran, whatever it found; 2 for bad input (a missing pack or model).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from remnant.atomic import write_atomic
from remnant.errors import ConfigError
from remnant.score.probe import Probe
from remnant.studies.auditor_table import AuditorSpec, AuditorTable, auditor_table, render_markdown

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
    dtype: str = "fp32",
    device: str = "cpu",
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
        state = load_model(source, dtype=dtype, device=device)
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


__all__ = ["REQUIREMENT", "pack_inputs", "run_auditors"]
