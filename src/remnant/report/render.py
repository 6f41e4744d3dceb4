"""Render conformance statements as self-contained HTML: technical report, customer register, comparison.

One template renders one or several assessments (the demo compares three removals); each assessment is a
:class:`ReportEntry`: the statement, its relearning curves, and optionally its manifest. Everything shown comes
from those objects; the verdict is never recomputed here (the statement's own is shown, V1). Jinja2 autoescapes
every value; the only markup inserted unescaped is the SVG the plots module draws.

The customer register (V6) passes every free-text field through :class:`~remnant.report.redact.Redactor`, so
no canary value reaches it (R18).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from markupsafe import Markup

from remnant.atomic import write_atomic
from remnant.curves import RelearningCurve
from remnant.report.curves import PointView, Separation, point_views, separation
from remnant.report.plots import IntervalRow, curve_svg, intervals_svg
from remnant.report.redact import Redactor
from remnant.report.samples import SampleTable
from remnant.run_manifest import RunManifest
from remnant.standard.derive import UNDEFINED_UTILITY
from remnant.standard.vocabulary import admission
from remnant.statement.absent import Absent
from remnant.statement.schema import Cell, ConformanceStatement

SURFACE_NAMES = {
    "relearning": "Relearning",
    "inference_time": "Inference-time",
    "weight_transform": "Weight transform",
    "latent": "Latent (non-adjudicating)",
}
PLAIN_ATTACKS = {
    "relearning": "retraining on related examples",
    "prefill": "starting the model's answer for it",
    "many_shot": "many worked examples in the prompt",
    "repeated_sampling": "asking many times",
    "quantization": "compressing the weights",
    "icl": "examples in the prompt",
    "gcg": "an optimised adversarial prompt",
    "soft_prompt": "a trained soft prompt",
}
STATUS_TEXT = {
    "run": "run",
    "not_applicable": "not applicable (C-Q2)",
    "not_run": "not run",
    "failed": "failed",
    "diverged": "diverged",
    "inadmissible": "inadmissible (R0.2, C2)",
}


@dataclass(frozen=True)
class ReportEntry:
    """One assessment to report: its statement, relearning curves and (optionally) manifest and file names."""

    statement: ConformanceStatement
    curves: Sequence[RelearningCurve] = ()
    manifest: RunManifest | None = None
    label: str | None = None
    statement_file: str = "statement.json"
    envelope_file: str | None = None
    public_key_file: str = "remnant.pub"
    statement_digest: str | None = None
    manifest_matches: bool | None = None
    #: Whether the envelope's signed payload carries this very statement (K5; its signature is not checked
    #: here, there is no key): None when not looked at. A report calls the statement signed only when True.
    envelope_matches: bool | None = None
    #: Per-attack per-item samples from the run's records (technical report only, R18), and why there are none
    #: or why their prompts are missing (a sentence the report prints; None when nothing is to be said).
    samples: Sequence[SampleTable] = ()
    samples_note: str | None = None


@dataclass(frozen=True)
class Rate:
    k: int
    n: int
    rate: float
    ci: tuple[float, float]


@dataclass(frozen=True)
class AttackRow:
    """One attack of the battery as the per-surface table shows it (R4, R19, C-Q2, R0.2, C-H6, C-W6)."""

    name: str
    surface: str
    status: str
    role: str
    reason: str
    post: Rate | None
    control: Rate | None
    post_reaches_tau: bool
    control_reaches_tau: bool


@dataclass(frozen=True)
class CurveView:
    curve: RelearningCurve
    svg: Markup
    points: list[PointView]
    separation: Separation
    plot_id: str


@dataclass(frozen=True)
class EntryView:
    """Everything the templates read about one assessment."""

    index: int
    label: str
    s: ConformanceStatement
    gloss: Any
    tier_name: str | None
    attacks: list[AttackRow]
    surfaces_svg: Markup | None
    curves: list[CurveView]
    utility_cells: list[Cell]
    manifest: RunManifest | None
    entry: ReportEntry
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def tau(self) -> float:
        return float(self.s.pre_registration.tau)

    @property
    def phi(self) -> float:
        return float(self.s.pre_registration.phi)

    @property
    def verdict(self) -> str | None:
        return None if isinstance(self.s.verdict, Absent) else self.s.verdict

    @property
    def signature(self) -> str:
        """What the reports may say of a signature (K5): ``signed`` (an envelope beside the statement whose
        payload is this statement; the signature itself is for ``remnant verify`` to check), ``other`` (an
        envelope that carries some other statement, or none readable), ``unknown`` (an envelope not looked
        at) or ``unsigned``."""
        if self.entry.envelope_file is None:
            return "unsigned"
        return {True: "signed", False: "other", None: "unknown"}[self.entry.envelope_matches]

    @property
    def utility_undefined(self) -> list[str]:
        """The metrics on which the pre-removal utility was measured at zero, leaving the removal-stage ratio
        undefined rather than unmeasured (R11); empty when that is not why it is absent."""
        utility = self.facts.get("utility")
        named = utility.get(UNDEFINED_UTILITY) if isinstance(utility, dict) else None
        if not isinstance(self.s.utility.removal_stage, Absent) or not isinstance(named, list):
            return []
        return [str(m) for m in named]

    @property
    def missing_controls(self) -> list[str]:
        """The adjudicating attacks that ran on the post-removal model with no control result (R3, R4): a report
        may say each attack ran on both models only when there are none."""
        return [a.name for a in self.attacks if a.role == "adjudicating" and a.post and a.control is None]

    @property
    def preregistered(self) -> bool:
        """Whether the statement carries the digest of a frozen pre-registration (R14)."""
        return not isinstance(self.s.pre_registration.digest, Absent)

    @property
    def installation(self) -> str:
        """What the reports may say of how the target was fixed (R2), from the statement's ``installation``:
        ``reached`` and ``unreached`` (installed here; the reports print κ against the target), ``provenance``
        (documented provenance, nothing measured) or ``not_recorded``. Only ``reached`` lets a report say the
        pre-removal model holds the target."""
        block = self.s.installation
        if not isinstance(block, Absent):
            return "reached" if block.reached else "unreached"
        return "provenance" if self.installation_provenance else "not_recorded"

    @property
    def installation_provenance(self) -> bool:
        """Whether documented provenance fixes the target (the facts' ``installation`` says so, R2)."""
        raw = self.facts.get("installation")
        return isinstance(raw, dict) and raw.get("fixed_by") == "provenance"

    @property
    def headline(self) -> AttackRow | None:
        """The run, adjudicating attack with the largest post-removal rate (g*, V1)."""
        ran = [a for a in self.attacks if a.post is not None and a.role == "adjudicating"]
        return max(ran, key=lambda a: a.post.rate if a.post else 0.0) if ran else None


def _rate(cell: Cell | None) -> Rate | None:
    return None if cell is None else Rate(k=cell.k, n=cell.n, rate=cell.rate, ci=cell.ci95)


def attack_rows(statement: ConformanceStatement) -> list[AttackRow]:
    """Every attack in the statement's facts, with both models' rates from its cells and its role in the verdict."""
    facts = statement.facts
    tau = float(statement.pre_registration.tau)
    by_id = {c.cell_id: c for c in statement.cells}
    rows: list[AttackRow] = []
    for attack in facts.get("attacks", []):
        name, surface = str(attack["name"]), str(attack["surface"])
        status = str(attack.get("status", "run"))
        reason = str(attack.get("reason") or "")
        # the verdict's order of admission (remnant.standard.verdict)
        kind = admission(statement.track, surface, attack.get("adjudicating", True) is not False)
        if kind == "latent":
            role = "non-adjudicating (C-H6)"
        elif kind == "inadmissible":
            role = f"inadmissible under {statement.track}-track (R0.2, C2)"
            status = "inadmissible" if status == "run" else status
            reason = reason or f"{statement.track}-track admits only the inference-time surface (R0.2, C2)"
        elif kind == "non_adjudicating":
            role = "reported, never decides (C-W6)"
        else:
            role = "adjudicating"
        post = _rate(by_id.get(f"{name}/{surface}/post_removal"))
        control = _rate(by_id.get(f"{name}/{surface}/control"))
        if status == "run" and control is None and role == "adjudicating":
            reason = reason or "control result not obtained: cannot support hidden (V1a)"
        rows.append(
            AttackRow(
                name=name,
                surface=surface,
                status=status,
                role=role,
                reason=reason,
                post=post,
                control=control,
                post_reaches_tau=post is not None and post.rate >= tau,
                control_reaches_tau=control is not None and control.rate >= tau,
            )
        )
    return rows


def _tier_name(tier: object) -> str | None:
    if not isinstance(tier, str) or not tier[1:].isdigit():
        return None
    from remnant.standard.tier import TIER_NAMES

    return TIER_NAMES.get(int(tier[1:]))


def entry_view(entry: ReportEntry, index: int) -> EntryView:
    """The template's view of one assessment: rows, plots and labels built from the statement and curves."""
    from remnant.standard.gloss import gloss

    s = entry.statement
    verdict = None if isinstance(s.verdict, Absent) else s.verdict
    rows = attack_rows(s)
    plotted = [
        IntervalRow(
            label=r.name,
            post_rate=r.post.rate,
            post_ci=r.post.ci,
            control_rate=r.control.rate if r.control else None,
            control_ci=r.control.ci if r.control else None,
        )
        for r in rows
        if r.post is not None
    ]
    surfaces_svg = (
        Markup(
            intervals_svg(
                plotted,
                tau=float(s.pre_registration.tau),
                plot_id=f"a{index}-surfaces",
                title="Each attack's rate on the post-removal model and on the control, with 95% intervals",
            )
        )
        if plotted
        else None
    )
    curves = []
    for j, curve in enumerate(entry.curves):
        plot_id = f"a{index}-curve{j}"
        curves.append(
            CurveView(
                curve=curve,
                svg=Markup(curve_svg(curve, plot_id=plot_id)),
                points=point_views(curve),
                separation=separation(curve),
                plot_id=plot_id,
            )
        )
    return EntryView(
        index=index,
        label=entry.label or f"Assessment {index + 1}",
        s=s,
        gloss=gloss(verdict) if verdict else None,
        tier_name=_tier_name(s.tier),
        attacks=rows,
        surfaces_svg=surfaces_svg,
        curves=curves,
        utility_cells=[c for c in s.cells if c.metric == "utility"],
        manifest=entry.manifest,
        entry=entry,
        facts=dict(s.facts),
    )


def _fmt_rate(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def _fmt_ci(ci: Sequence[float] | None) -> str:
    return "—" if ci is None else f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def _fmt_pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def _short(digest: object, keep: int = 16) -> str:
    text = str(digest)
    head, sep, tail = text.partition(":")
    if sep and len(tail) > keep:
        return f"{head}:{tail[:keep]}…"
    return text


def _environment(redactor: Redactor | None) -> Any:
    from jinja2 import Environment, PackageLoader, StrictUndefined

    env = Environment(
        loader=PackageLoader("remnant.report", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(
        rate=_fmt_rate,
        ci=_fmt_ci,
        pct=_fmt_pct,
        short=_short,
        surface=lambda s: SURFACE_NAMES.get(s, s),
        status=lambda s: STATUS_TEXT.get(s, s),
        plain_attack=lambda s: PLAIN_ATTACKS.get(s, s.replace("_", " ")),
        redact=redactor if redactor is not None else (lambda v: "" if v is None else str(v)),
    )
    env.tests["absent"] = lambda v: isinstance(v, Absent)
    return env


def design_notes(entries: Sequence[ReportEntry], labels: Sequence[str]) -> list[str]:
    """D5: a comparison of Class D assessments states every difference of canary design from the first one's, and
    says where a design is not recorded or not readable (its rates are then of unknown comparability)."""
    from pydantic import ValidationError

    from remnant.classd.design import CanaryDesign, comparison_warning

    designs: list[tuple[str, CanaryDesign | None]] = []
    for entry, label in zip(entries, labels, strict=True):
        block = entry.statement.class_d
        if isinstance(block, Absent):
            continue
        try:
            designs.append((label, CanaryDesign.model_validate(block.canary_design)))
        except ValidationError:
            designs.append((label, None))
    if len(designs) < 2:
        return []
    notes = [
        f"D5: {label} records no readable canary design, so its Class D rates cannot be compared with the others'"
        for label, design in designs
        if design is None
    ]
    first_label, first = designs[0]
    for label, design in designs[1:]:
        warning = comparison_warning(first, design) if first and design else None
        if warning:
            notes.append(f"{first_label} and {label}: {warning}")
    return notes


def render_comparison(
    entries: Sequence[ReportEntry],
    *,
    customer: bool = False,
    canaries: Sequence[str] | frozenset[str] | None = None,
    title: str | None = None,
) -> str:
    """One HTML page for one or more assessments; with several, a comparison table leads (R22: per cell, never pooled).

    ``customer`` selects the non-technical register (V6); its free text is redacted against ``canaries`` (the
    pack's :func:`~remnant.report.redact.canary_strings`), or withheld when ``canaries`` is None (R18).
    """
    if not entries:
        raise ValueError("nothing to report: no statements given")
    redactor = Redactor(canaries) if customer else None
    env = _environment(redactor)
    views = [entry_view(entry, i) for i, entry in enumerate(entries)]
    template = env.get_template("customer.html.j2" if customer else "report.html.j2")
    from remnant import __version__

    default_title = (
        "Removal assessment" if len(views) == 1 else f"Comparison of {len(views)} removal assessments"
    )
    notes = design_notes(entries, [view.label for view in views])
    return str(
        template.render(
            entries=views, design_notes=notes, title=title or default_title, harness_version=__version__
        )
    )


def render_report(
    entry: ReportEntry | ConformanceStatement,
    *,
    curves: Sequence[RelearningCurve] = (),
    customer: bool = False,
    canaries: Sequence[str] | frozenset[str] | None = None,
) -> str:
    """HTML for one assessment (technical, or the customer register with ``customer=True``)."""
    if isinstance(entry, ConformanceStatement):
        entry = ReportEntry(statement=entry, curves=tuple(curves))
    return render_comparison([entry], customer=customer, canaries=canaries)


def write_html(path: str | Path, html: str) -> Path:
    """Write ``html`` atomically (temp + fsync + replace)."""
    return write_atomic(path, html)
