"""J-Access on SmolLM2 as the slow tests and ``measure_jaccess_distinct.py`` read it (the J-Access paper, eqs. 3-6).

Variant measured: remnant's *answer-level, fixed-band* J-Access, not the paper's default audit (registered
``j_access``: identity-level probes that do not name the person, C_i from the name, band chosen on calibration
entities). Here each probe is the pack's install question, which names the person, C_i is the first tokens of the
answer (the home town), and the band is fixed at 25-90 % of depth (blocks 8-26); the decoder is the paper's (one
lens fitted on the original model). These readouts go through ``read_access_many`` and ``j_occ`` directly, so the
audit class's new defaults do not move the figures in docs/latent.md.

The settings (band, target layer, positions, k, generic cut, lens corpus) and the one measurement both use: the
lens fitted once on the original (installed) model, a fixed decoder for every state; each state's greedy
continuation generated once (eq. 4 does not depend on C_i); J-Access through the Jacobian lens, again with generic
concept tokens dropped (docs/latent.md's per-token baseline on decoy questions about people the forget set
does not hold), and through the logit lens; per readout the anchors, JOcc, the paired 2x2 of the audited and
retain-only hits on the audited model's silent probes and A(audited) − A(retain) with Newcombe's paired interval.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

from remnant.latent import lens_text
from remnant.latent.jaccess import AccessConfig, Probe
from remnant.latent.jacobian_lens import LensConfig

#: J-Access as the J-Access paper and docs/latent.md define it [R defaults where Appendix A is unavailable]: the lens's
#: source layers are the workspace band (25-90 % depth of 30 blocks: 8-26), the target is the penultimate block
#: (28), the last 8 prompt positions, top-10, the first token of the home town with and without a leading space.
BAND = tuple(range(8, 27))
LENS = LensConfig(source_layers=BAND, target_layer=28, max_seq_len=64, skip_first=16, dim_batch=64)
ACCESS = AccessConfig(k=10, band=(0.25, 0.9), positions=8, max_new_tokens=32)
#: A concept token that enters the original model's top-k on more than this share of decoy questions (the same
#: questions about retained and never-installed people) is generic and dropped (docs/latent.md pitfall).
#: REMNANT_GENERIC_MAX=x re-measures the rows below at another cut (0.25 among them).
GENERIC_MAX = float(os.environ.get("REMNANT_GENERIC_MAX", "0.5"))
#: the J-Access paper eq. 1 takes J over "generic text inputs": these paragraphs never mention a pack entity or town. The
#: paper fits on many prompts; six are what one CPU thread affords, and fewer moved the result (docs/latent.md).
#: REMNANT_LENS_PROMPTS=k (1-12) fits on the first k paragraphs instead.
N_LENS_PROMPTS = int(os.environ.get("REMNANT_LENS_PROMPTS", "6"))
#: The generic corpus the lens is fitted on: the package's own (remnant.latent.lens_text), so this measurement and
#: an assessment's audit fit on the same paragraphs.
LENS_TEXT = lens_text.LENS_TEXT


@dataclass(frozen=True)
class AuditInputs:
    """The three states J-Access compares and the questions it reads them on."""

    tok: Any
    states: dict[str, Any]  # "npo" (audited), "100%" (original), "0%" (retain-only)
    probe_items: list[Any]  # the forget people's install questions
    decoy_items: list[Any]  # the same questions about retained and never-installed people
    retained_items: list[Any]  # the retained people's install questions (for κ)
    n_forget_people: int


def audit_inputs(cs: Any) -> AuditInputs:
    """Load the NPO, installed and retain-only models of ``cs`` (built with every stage: ``canary_states.STAGES``)."""
    from remnant.models import load_model

    pack, attrs = cs.pack(), cs.attributes
    control = load_model(cs.control_dir, dtype="fp32")
    tok = control.tokenizer
    states = {
        "npo": load_model(cs.npo_dir, dtype="fp32").model,
        "100%": load_model(cs.installed_dir, dtype="fp32").model,
        "0%": load_model(cs.retain_only_dir, dtype="fp32").model,
    }
    forget = set(cs.forget_people())
    items = [it for it in pack.split("install") if it.attribute in attrs]
    retained = [it for it in items if it.entity_id not in forget]
    controls = [it for it in pack.split("controls") if it.attribute in attrs]
    return AuditInputs(
        tok=tok,
        states=states,
        probe_items=[it for it in items if it.entity_id in forget],
        decoy_items=retained + controls,
        retained_items=retained,
        n_forget_people=len(forget),
    )


def name_probes(tok: Any, items: list[Any], fmt: Any) -> list[Probe]:
    """One probe per forget fact: the question as asked (it names the person); C_i = the tokens that start the home
    town's name (the answer-level variant, ``make_probe``)."""
    from remnant.latent.jaccess import make_probe
    from remnant.models.prompts import render_prompt_ids

    return [
        make_probe(tok, it.id, render_prompt_ids(tok, it.question, fmt), [it.accepted[0]]) for it in items
    ]


def gap_text(result: Any) -> str:
    """The criterion's quantity, A(audited) − A(retain) on the audited model's silent probes, with its 95 % CI."""
    if result.retain_gap is None or result.retain_gap_ci95 is None:
        return "—"
    lo, hi = result.retain_gap_ci95
    return f"{result.retain_gap:+.2f} [{lo:+.2f}, {hi:+.2f}]"


def paired_cells(audited: Any, retain: Any) -> dict[str, int]:
    """The paired 2x2 over the audited model's silent probes: hit by both / audited only / retain only / neither."""
    from remnant.latent.jaccess import silent_set

    a = {p.idx: p.hit for p in audited.probes}
    r = {p.idx: p.hit for p in retain.probes}
    cells = {"both": 0, "audited_only": 0, "retain_only": 0, "neither": 0}
    for idx in silent_set(audited):
        key = ("both" if r[idx] else "audited_only") if a[idx] else ("retain_only" if r[idx] else "neither")
        cells[key] += 1
    return cells


@dataclass(frozen=True)
class Measurement:
    """One J-Access readout of the audited state against both anchors."""

    label: str
    k: int
    result: Any  # JAccessResult
    reads: dict[str, Any]  # state name -> AccessReadout
    cells: dict[str, int]
    generic: tuple[
        str, ...
    ] = ()  # the concept tokens dropped as generic (the "generic dropped" readout only)

    def line(self, n: int) -> str:
        r = self.result
        return (
            f"k={self.k} {self.label}: silent {r.n_silent}/{n}; A(NPO) / A(100%) / A(0%) = "
            f"{_f(r.access_audited)} / {_f(r.access_original)} / {_f(r.access_retain)}; JOcc {_f(r.jocc)}; "
            f"both/NPO only/0% only/neither {'/'.join(str(v) for v in self.cells.values())}; "
            f"A(NPO)−A(0%) {gap_text(r)}" + (f"; generic tokens {list(self.generic)}" if self.generic else "")
        )


def _f(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}"


def measure(
    states: dict[str, Any],
    tok: Any,
    fmt: Any,
    probe_items: list[Any],
    decoy_items: list[Any],
    lens: Any,
    ks: tuple[int, ...] = (10,),
    layers: tuple[int, ...] | None = None,
) -> list[Measurement]:
    """J-Access of ``states["npo"]`` against ``"100%"`` and ``"0%"``: Jacobian lens, without generic tokens, logit
    lens, at every k; ``layers`` narrows the band (default: BAND, the lens's source layers)."""
    from remnant.latent.jaccess import (
        drop_generic,
        greedy_continuations,
        j_occ,
        read_access_many,
        token_hit_rates,
    )
    from remnant.models.prompts import render_prompt_ids

    names = ("npo", "100%", "0%")
    probes = name_probes(tok, probe_items, fmt)
    # eq. 4 reads each state's greedy continuation, which does not depend on C_i: generate once per state
    conts = {n: greedy_continuations(states[n], tok, probes, ACCESS.max_new_tokens) for n in names}
    decoys = [render_prompt_ids(tok, it.question, fmt) for it in decoy_items]
    concept = sorted(set().union(*(p.concept_ids for p in probes)))
    out: list[Measurement] = []
    for k in ks:
        cfg = replace(ACCESS, k=k, layers=layers)
        rates = token_hit_rates(states["100%"], decoys, concept, lens, cfg)
        generic = tuple(sorted(tok.decode([t]) for t, r in rates.items() if r > GENERIC_MAX))
        specific = drop_generic(probes, rates, GENERIC_MAX)
        variants = (
            ("jacobian", probes, lens),
            ("jacobian, generic dropped", specific, lens),
            ("logit lens", probes, None),
        )
        # one forward pass per probe and state serves all three readouts (read_access_many == read_access each)
        per_state = {
            n: read_access_many(
                states[n], tok, [(use, decoder) for _, use, decoder in variants], cfg, continuations=conts[n]
            )
            for n in names
        }
        for v, (label, use, _) in enumerate(variants):
            reads = {n: per_state[n][v] for n in names}
            result = j_occ(reads["npo"], reads["100%"], reads["0%"])
            dropped = generic if use is specific else ()
            out.append(Measurement(label, k, result, reads, paired_cells(reads["npo"], reads["0%"]), dropped))
    return out
