"""The technical report: claim verbatim, verdict with scope (V4) and gloss (V6), tier apart (T1), every attack with
both models' k/n and Wilson intervals (R4, R19), curves at every checkpoint (C-W5), utility (R11, R12), latent
labelled non-adjudicating (C-H6, C-H7), deviations (R15), digests and the verify command (K5)."""

from __future__ import annotations

import copy
import html
import re

from report_helpers import (
    bf16,
    collapsed_facts,
    hidden_facts,
    make_curve,
    make_manifest,
    make_statement,
    near_tau_facts,
)

from remnant.report.curves import point_views, separation
from remnant.report.render import ReportEntry, attack_rows, render_comparison, render_report
from remnant.statement.example import example_facts, example_statement
from remnant.statement.schema import Deviation
from remnant.stats import wilson_interval


def _text(page: str) -> str:
    """Visible text, roughly: tags stripped, entities decoded, whitespace collapsed."""
    body = re.sub(r"<style>.*?</style>", " ", page, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", body)))


def test_report_shows_claim_verdict_scope_gloss_and_tier_apart() -> None:
    statement = example_statement()
    page = render_report(
        ReportEntry(statement=statement, curves=[make_curve()], envelope_file="statement.dsse.json")
    )
    text = _text(page)
    assert statement.claim in text
    assert (
        f"removed, under W-track assessment against pack example-c at τ = 0.5, as of {statement.model.version}"
        in text
    )
    assert "held up under attack" in text  # V6 gloss beside the normative term
    assert 'class="verdict v-removed"' in page
    assert "Tier W4: Defensible Removal Claim" in text
    assert "it is not a verdict (T1)" in text
    assert "remnant verify statement.dsse.json --key remnant.pub" in text
    assert "remnant validate statement.json" in text
    assert str(statement.manifest_ref) in text and str(statement.pre_registration.digest) in text


def test_every_attack_row_carries_both_models_counts_and_wilson_intervals() -> None:
    statement = example_statement()
    text = _text(render_report(statement))
    for attack in example_facts()["attacks"]:
        lo, hi = wilson_interval(attack["k"], attack["n"])
        clo, chi = wilson_interval(attack["control_k"], attack["control_n"])
        row = (
            f"{attack['name']} "
            + {"relearning": "Relearning", "inference_time": "Inference-time"}[attack["surface"]]
            + f" adjudicating run {attack['k']}/{attack['n']} {attack['k'] / attack['n']:.3f} [{lo:.3f}, {hi:.3f}]"
            + f" {attack['control_k']}/{attack['control_n']} {attack['control_k'] / attack['control_n']:.3f}"
            + f" [{clo:.3f}, {chi:.3f}]"
        )
        assert row in text, row
    for cell in statement.cells:  # R22: every cell listed
        assert cell.cell_id in text


def test_curve_table_lists_every_checkpoint_of_both_models() -> None:
    curve = make_curve()
    text = _text(render_report(example_statement(), curves=[curve]))
    for point in curve.points:
        lo, hi = wilson_interval(point.post_k, point.post_n)
        assert f"{point.checkpoint} {point.step} {point.examples} {point.post_k}/{point.post_n}" in text
        assert f"[{lo:.3f}, {hi:.3f}] {point.control_k}/{point.control_n}" in text
    assert "Relearning budget: 40 examples" in text
    assert "stayed below it after 16 examples (step-4)" in text


def test_curves_are_inline_svg_with_both_lines_and_bands() -> None:
    page = render_report(example_statement(), curves=[make_curve(), make_curve(budget=80)])
    for plot in ("a0-curve0", "a0-curve1"):
        for part in ("post", "control", "post-band", "control-band", "tau"):
            match = re.search(rf'<g id="{plot}-{part}"[^>]*>(.*?)</g>', page, flags=re.S)
            assert match and "<path" in match.group(1), f"{plot}-{part}"
    assert page.count("<svg") == 3  # two curves and the per-attack interval plot
    # Self-contained: no script, no external resource.
    assert "<script" not in page.lower()
    assert not re.search(r"""\b(src|href)=["']?(https?:|//)""", page)
    assert "<link" not in page


def test_separation_finds_first_checkpoints() -> None:
    sep = separation(make_curve())
    assert sep.at_tau is not None and sep.at_tau.checkpoint == "step-4"
    # step-2: post 10/50 lower bound 0.112 > control 1/50 upper bound 0.105; step-0 overlaps.
    assert sep.by_interval is not None and sep.by_interval.checkpoint == "step-2"
    assert sep.control_reaches_tau is None
    learnable = separation(make_curve([(0, 2, 1), (2, 30, 28), (4, 45, 44)]))
    assert learnable.at_tau is None and learnable.by_interval is None
    assert learnable.control_reaches_tau is not None and learnable.control_reaches_tau.checkpoint == "step-2"


def test_point_views_are_net_of_chance_for_mcq() -> None:
    curve = make_curve([(0, 20, 10)], n=40).model_copy(update={"chance_rate": 0.25})
    view = point_views(curve)[0]
    lo, hi = wilson_interval(20, 40)
    assert view.post_rate == 0.25  # 0.5 - 0.25
    assert view.post_ci == (lo - 0.25, hi - 0.25)
    assert view.control_rate == 0.0  # 0.25 - 0.25 floored at zero
    assert view.control_ci is not None and view.control_ci[0] == 0.0


def test_claim_is_autoescaped() -> None:
    page = render_report(make_statement(claim="Forgets <script>alert('x')</script> & co"))
    assert "<script" not in page
    assert "Forgets &lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; co" in page


def test_hidden_and_collapsed_verdicts_read_as_such() -> None:
    hidden = _text(render_report(make_statement(hidden_facts()), curves=[make_curve()]))
    assert "hidden — suppressed, not removed" in hidden
    assert "Does not support a claim that the data or capability is gone" in hidden
    collapsed = _text(render_report(make_statement(collapsed_facts())))
    assert "utility-collapsed — broke the model" in collapsed
    assert "not a successful removal" in collapsed and "(V2)" in collapsed
    assert "below the floor" in collapsed


def test_q_track_relearning_is_inadmissible_and_not_applicable_has_its_reason() -> None:
    facts = copy.deepcopy(example_facts())
    facts["track"] = "Q"
    facts["attacks"][1] = {
        "name": "prefill",
        "surface": "inference_time",
        "status": "not_applicable",
        "reason": "the target has no answer prefix to force",
    }
    statement = make_statement(facts)
    rows = {r.name: r for r in attack_rows(statement)}
    assert rows["relearning"].status == "inadmissible"
    assert rows["relearning"].role == "inadmissible under Q-track (R0.2, C2)"
    assert rows["prefill"].status == "not_applicable" and rows["prefill"].post is None
    text = _text(render_report(statement))
    assert "relearning Relearning inadmissible under Q-track (R0.2, C2) inadmissible (R0.2, C2)" in text
    assert "not applicable (C-Q2) — — — — — — the target has no answer prefix to force" in text


def test_latent_block_is_labelled_non_adjudicating_and_deviations_listed() -> None:
    deviation = Deviation(
        field="min_n", old=300, new=250, reason="fewer probe items passed the filter", stage="mint"
    )
    statement = make_statement(deviations=[deviation])
    text = _text(render_report(example_statement()))
    assert "non-adjudicating" in text and "carry no weight in the verdict or the tier" in text
    assert (
        "direction_survival 0.700 never-modified control pre_removal, post_removal 18 last prompt token"
        in text
    )
    assert "Controls (C-H7c): not run." in text
    with_dev = _text(render_report(statement))
    assert "min_n 300 250 mint fewer probe items passed the filter" in with_dev
    assert "None: every pre-registered value was used as frozen." in text


def test_comparison_of_three_keeps_each_assessment() -> None:
    entries = [
        ReportEntry(statement=make_statement(hidden_facts()), curves=[make_curve()], label="NPO"),
        ReportEntry(statement=make_statement(collapsed_facts()), label="damaging"),
        ReportEntry(statement=example_statement(), label="retrain"),
    ]
    page = render_comparison(entries)
    text = _text(page)
    assert "Comparison of 3 removal assessments" in text
    assert "NPO hidden (suppressed, not removed)" in text
    assert "damaging utility-collapsed (broke the model) 0.420 vs 0.9" in text
    assert "retrain removed (held up under attack)" in text
    assert all(f'id="entry-{i}"' in page for i in range(3))
    assert page == render_comparison(entries)  # deterministic bytes


def test_report_without_verdict_term_never_shows_bare_removed() -> None:
    """V4: wherever the report says the verdict, its scope qualifier is on the page with it."""
    text = _text(render_report(example_statement()))
    assert text.count("removed, under W-track assessment against") >= 1


def test_precision_warnings_reach_the_verdict_box() -> None:
    """R25: where a threshold lies within the precision margin, the report says so beside the verdict."""
    facts = near_tau_facts()
    entry = ReportEntry(
        statement=make_statement(facts), manifest=make_manifest(facts, reductions=[bf16(0.01)])
    )
    text = _text(render_report(entry))
    assert "1 verdict-relevant quantity lies within the precision margin of τ or φ" in text
    assert (
        "post-removal upper bound of relearning = 0.4980 lies within the precision margin ±0.0100 of τ = 0.5"
        in text
    )
    quiet = _text(render_report(ReportEntry(statement=make_statement(facts), manifest=make_manifest(facts))))
    assert "within the precision margin" not in quiet and "No precision reductions were recorded." in quiet


def test_class_d_block_shows_each_risk_net_of_control_and_baseline() -> None:
    """D4, D-4.2, D-5.1: the reader sees, per risk, the raw rate, the control-entity rate, the baseline, the net
    interval D-5.1 tests, and whether its upper bound clears the declared threshold."""
    from remnant.statement.schema import ClassDBlock, RateReport

    def risk(k: int, n: int, ck: int, cn: int, baseline: float, below: bool) -> RateReport:
        lo, hi = wilson_interval(k, n)
        shift = baseline + ck / cn
        net = max(0.0, k / n - shift)
        return RateReport(
            k=k,
            n=n,
            rate=k / n,
            ci95=(lo, hi),
            measurement="relearning",
            control_k=ck,
            control_n=cn,
            baseline=baseline,
            net_rate=net,
            net_ci95=(max(0.0, lo - shift), max(0.0, hi - shift)),
            upper_bound=max(0.0, hi - shift),
            below_threshold=below,
        )

    block = ClassDBlock(
        threshold=0.05,
        justification="Re-identification is not reasonably likely below 5% (declared).",
        singling_out=risk(0, 40, 0, 10, 0.0, False),
        linkability=risk(9, 40, 2, 10, 0.25, False),
        inference=risk(30, 40, 1, 10, 0.5, False),
        passes=False,
        canary_design={"attribute_cardinality": 60, "repetitions": 3},
    )
    statement = make_statement().model_copy(update={"class_d": block})
    text = _text(render_report(statement))
    assert "Declared insignificance threshold 0.05" in text
    assert "At least one net upper bound is at or above the threshold." in text
    # raw 9/40 with its Wilson interval; 2/10 control entities; baseline 0.25; net 0.225 - 0.25 - 0.2 floored at 0
    assert "Linkability relearning 9/40 0.225 [0.123, 0.375] 2/10 0.250 0.000 [0.000, 0.000] no" in text
    # net of baseline 0.5 and control 0.1: 0.15, interval [0.498 - 0.6 -> 0, 0.858 - 0.6]
    assert (
        "Inference over the population baseline relearning 30/40 0.750 [0.598, 0.858] 1/10 0.500 0.150 [0.000, 0.258] no"
        in text
    )
    assert "attribute cardinality 60; repetitions 3" in text


def test_a_comparison_of_class_d_assessments_states_every_canary_design_difference() -> None:
    """D5: rates across assessments with different canary designs are never compared without stating the
    difference; a design that is not recorded is said to be of unknown comparability; equal designs say nothing."""
    from remnant.classd.design import design_of
    from remnant.packs import ClassDSpec, mint_class_d
    from remnant.report.render import design_notes
    from remnant.statement.schema import ClassDBlock, RateReport

    def entry(design: dict[str, object] | None, label: str) -> ReportEntry:
        rate = RateReport(k=0, n=8, rate=0.0, ci95=wilson_interval(0, 8), measurement="relearning")
        block = ClassDBlock(
            threshold=0.05,
            justification="declared",
            singling_out=rate,
            linkability=rate,
            inference=rate,
            passes=False,
            canary_design=design,
        )
        return ReportEntry(statement=make_statement().model_copy(update={"class_d": block}), label=label)

    def design(**spec: int) -> dict[str, object]:
        return design_of(mint_class_d(ClassDSpec(entities=8, controls=2, seed=1, **spec))).model_dump(
            mode="json"
        )

    three, five = design(repetitions=3), design(repetitions=5)
    same = [entry(three, "A"), entry(design(repetitions=3), "B")]
    assert design_notes(same, ["A", "B"]) == []
    notes = design_notes([entry(three, "A"), entry(five, "B"), entry(None, "C")], ["A", "B", "C"])
    assert notes[0].startswith("D5: C records no readable canary design")
    assert notes[1].startswith("A and B: D5: the canary designs of")
    assert "differ (repetitions: 3 vs 5); canary design determines audit power" in notes[1]
    page = _text(render_comparison([entry(three, "A"), entry(five, "B")]))
    assert "repetitions: 3 vs 5" in page
    assert "repetitions: 3 vs 5" not in _text(render_comparison(same))
