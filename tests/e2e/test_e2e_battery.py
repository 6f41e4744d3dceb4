"""The inference-time battery on SmolLM2-135M-Instruct (slow; C-Q1, C-Q3, C-Q4).

An installed-then-NPO-removed canary pack (the shared ``canary_states``: control, pre-removal, post-removal) is
attacked by every registered query-access and weight-transform attack (§4.3; C-Q1), each run identically on the
post-removal model, the never-modified control (C-Q4) and the pre-removal model (C-Q3), scoring P: the probe
entities' installed items (R16). Each cell is k/n with its two-sided 95% Wilson interval (R19, R22) and the time
the attack took on that state. Each attack is its own test (its time is the test's); the markdown table is printed
(run with ``-s``) and written under the last test's tmp dir, with a JSON record beside it.

Budgets are CPU-sized: the whole file runs in a few minutes on one thread. The optimising attacks (GCG, soft
prompt) run two steps, and every attack but prefill runs on one item of each of two probe entities; prefill, the
attack the Class D run uses too, scores all of P. An attack added to the registry later runs with its
``smoke_params`` on those few items, so this file covers it without edits.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from canary_states import canary_states  # noqa: F401

from fixtures_models import smollm2_dir  # noqa: F401

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("smollm2")]

SEED = 0
#: Generation room beyond the longest accepted answer form ("Guotrogeix Leigraelerk was born in 1997." is 18
#: tokens): a budget that cuts the sentence before the year scores a false negative (seen at 16 tokens).
SLACK_TOKENS = 2
#: Budgets per attack (the registry records every other parameter at its default: K4). Each attack runs its whole
#: loop on every state at a small budget that still iterates (two optimisation steps, several samples): what this
#: file checks is that the battery runs identically on the three states (C-Q4) and counts every item (R19), not
#: how far a CPU-sized attack gets.
BUDGETS: dict[str, dict[str, Any]] = {
    "prefill": {},
    "aoa": {},
    "icl": {"shots": 3},
    "mask": {},
    "many_shot": {"shots": 6},
    # max_new_tokens None: the context's budget, long enough for the sentence-form answers
    "repeated_sampling": {"n_samples": 4, "ks": (1, 4), "max_new_tokens": None},
    "repeated_sampling_analytic": {"n_samples": 6, "ks": (1, 6)},
    "quantize": {"scheme": "nf4"},
    "gcg": {"suffix_len": 6, "steps": 2, "search_width": 8, "topk": 8, "batch_size": 8},
    "soft_prompt": {"n_tokens": 6, "steps": 2},
    "actpert": {"n_perturbations": 2, "strength": 2.0},  # one strength (actpert_sweep is the best-of-k)
    "actpert_sweep": {"n_perturbations": 1, "strengths": (1.0, 4.0)},
}
#: The attacks that score all of P; every other runs on one item of each of the first ``FEW_ENTITIES`` probe
#: entities (what this file checks, identical runs that count every item, does not grow with the items; the
#: optimising and many-generation attacks were the slowest of the battery on all of P).
ALL_OF_P = {"prefill"}
FEW_ENTITIES = 2
#: Surfaces that are not run at inference time on a fixed model: relearning trains, latent audits read.
SKIP_SURFACES = {"relearning", "latent"}
#: Per-item ``extra`` keys that describe the attack's *inputs*: equal on every state (C-Q4).
INPUT_KEYS: dict[str, tuple[str, ...]] = {
    "prefill": ("prefill",),
    "aoa": ("opener", "identity"),
    "icl": ("shots", "demonstrations"),
    "mask": ("masked_question", "masked_spans"),
    "many_shot": ("shots", "demo_ids", "shared_prefix_tokens", "prompt_tokens"),
    "repeated_sampling": ("n_samples", "sample_seeds"),
    "quantize": ("scheme",),
    "gcg": ("target", "seed", "excluded_tokens"),
    "soft_prompt": ("target", "init_ids"),
    "actpert": ("seed", "positions", "positions_source", "noise_scale", "layer"),
}


def _p_probes(states: Any) -> list[Any]:
    """P as probes (entity names filled in, so stems, clozes and entity positions exist), in P's order."""
    from remnant.score.probe import probes_from_pack

    pack = states.pack()
    probe_entities = {e.name for e in pack.manifest.entities if e.role == "forget_probe"}
    probes = [
        p
        for p in probes_from_pack(pack, "install")
        if p.entity in probe_entities and p.attribute in states.attributes
    ]
    expected = [(q.question, q.answer) for q in states.sets()["P"]]
    assert [(p.question, p.answer) for p in probes] == expected, "probes must be exactly the P set"
    return probes


def _retain_demos(states: Any) -> list[Any]:
    """Retain entities' installed items (what many-shot and ICL show the model as demonstrations)."""
    from remnant.score.probe import probes_from_pack

    pack = states.pack()
    retain = {e.name for e in pack.manifest.entities if e.role == "retain"}
    return [p for p in probes_from_pack(pack, "install") if p.entity in retain]


def _answer_budget(tokenizer: Any, fmt: Any, probes: Sequence[Any]) -> int:
    """New tokens enough for every probe's longest answer form, end of turn included, plus slack."""
    from remnant.models.prompts import encode_pair

    longest = max(
        len(encode_pair(tokenizer, p.question, form, fmt).answer_ids)
        for p in probes
        for form in (p.answer, *p.accepted)
    )
    return longest + SLACK_TOKENS


def _few_items(probes: Sequence[Any]) -> list[Any]:
    """The first item of each of the first ``FEW_ENTITIES`` probe entities."""
    seen: set[str | None] = set()
    out = []
    for p in probes:
        if p.entity not in seen and len(seen) < FEW_ENTITIES:
            seen.add(p.entity)
            out.append(p)
    return out


def _fmt_params(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items()) or "defaults"


class _Keeping:
    """An attack that keeps the outcomes of its last run: the records hold each item's output and score, not the
    inputs (``extra``) the C-Q4 checks compare state by state."""

    def __init__(self, attack: Any) -> None:
        self.attack, self.outcomes = attack, []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.attack, name)

    def run(self, ctx: Any, probes: Sequence[Any]) -> list[Any]:
        self.outcomes = list(self.attack.run(ctx, probes))
        return self.outcomes


def _through_runner(
    runner: Any, name: str, attack: Any, ctx: Any, states: dict[str, Any], probes: Any
) -> Any:
    """One attack on every state through the one cell runner (C-Q4: one context, one measurement), each state's
    result rebuilt from its kept outcomes and checked against its κ record (R19)."""
    from types import SimpleNamespace

    from remnant.attacks.harness import cell
    from remnant.engine.attack import AttackMeasurement, not_applicable
    from remnant.engine.measurement import run_measurement
    from remnant.score.probe import target_format

    reason = attack.applicable(target_format(list(probes)))
    if reason is not None:
        run_measurement(runner, not_applicable(name, attack.surface, reason, {}), None)
        return SimpleNamespace(status="not_applicable", reason=reason, states={})
    kept = _Keeping(attack)
    measurement = AttackMeasurement(name, kept, ctx, probes, {}, roles=tuple(states))
    out = {}
    for role, state in states.items():
        (kappa,) = [r for r in run_measurement(runner, measurement, state) if r.metric == "kappa"]
        assert kappa.status == "run", (name, role, kappa.reason)
        out[role] = cell(role, kept.outcomes, probes, kappa.elapsed_s)
        assert (out[role].kappa.k, out[role].kappa.n) == (kappa.k, kappa.n), (name, role)
    return SimpleNamespace(status="run", reason=None, states=out)


def _cq3(base: dict[str, Any], attacked: dict[str, Any]) -> Any:
    """C-Q3's reading (the one rule) of an attack's κ against the baseline's on the same items."""
    from types import SimpleNamespace

    from remnant.standard.cq3 import explain
    from remnant.standard.vocabulary import POST, PRE

    post_delta = attacked[POST].kappa.net - base[POST].kappa.net
    pre_delta = attacked[PRE].kappa.net - base[PRE].kappa.net
    explanation, reason = explain(post_delta, pre_delta)
    return SimpleNamespace(explanation=explanation, reason=reason, post_delta=post_delta, pre_delta=pre_delta)


def _state_dict(c: Any) -> dict[str, Any]:
    kappa = {**c.kappa.to_dict(), "expected_k": c.expected_k}
    items = [
        {"item_id": o.item_id, "output": o.output, "kappa": o.kappa, "extra": dict(o.extra)}
        for o in c.outcomes
    ]
    return {
        "kappa": kappa,
        "willing": c.willing.to_dict() if c.willing else None,
        "seconds": c.seconds,
        "items": items,
    }


def _row(attack: str, params: str, state: str, cell: Any) -> str:
    r = cell.kappa
    k = f"{r.k}/{r.n}"
    if cell.expected_k is not None:
        k += f" (Σp={cell.expected_k:.2f})"
    return f"| {attack} | {params} | {state} | {k} | {r.point:.3f} | [{r.lo:.3f}, {r.hi:.3f}] | {cell.seconds:.1f} |"


def _attack_names() -> list[str]:
    """Every registered attack run at inference time on a fixed model (the registry decides: C-Q1)."""
    from remnant import registry

    return [n for n in registry.names("attack") if registry.get("attack", n).surface not in SKIP_SURFACES]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "attack_name" in metafunc.fixturenames:
        metafunc.parametrize("attack_name", _attack_names())


@pytest.fixture(scope="module")
def battery(canary_states: Any) -> dict[str, Any]:  # noqa: F811
    """The three states loaded, P, the attack context and the unattacked baseline once per state (the harness
    would recompute it for every attack); each attack's results are added by :func:`_run_attack`."""
    from remnant.attacks.base import AttackContext, no_attack
    from remnant.attacks.harness import cell
    from remnant.engine.measurement import StateView
    from remnant.engine.runner import CellRunner, MemoryStore
    from remnant.models import load_model
    from remnant.standard.vocabulary import CONTROL, POST, PRE

    states = canary_states
    start = time.perf_counter()
    post = load_model(states.npo_dir, dtype="fp32")
    loaded = {
        POST: post,
        CONTROL: load_model(states.control_dir, dtype="fp32"),
        PRE: load_model(states.installed_dir, dtype="fp32"),
    }
    load_secs = time.perf_counter() - start
    probes = _p_probes(states)
    max_new_tokens = _answer_budget(post.tokenizer, states.fmt(), probes)
    ctx = AttackContext(
        model=post.model,
        tokenizer=post.tokenizer,
        fmt=states.fmt(),
        seed=SEED,
        demonstrations=tuple(_retain_demos(states)),
        max_new_tokens=max_new_tokens,
    )
    baseline = {}
    for label, m in loaded.items():
        t = time.perf_counter()
        outs = no_attack(ctx.with_model(m.model, post.tokenizer), probes)
        baseline[label] = cell(label, outs, probes, time.perf_counter() - t)
    return {
        "views": {
            role: StateView(role, m.identity.digest, m.model, post.tokenizer) for role, m in loaded.items()
        },
        "runner": CellRunner(MemoryStore(), "e2e-battery"),
        "ctx": ctx,
        "probes": probes,
        "few": _few_items(probes),
        "baseline": baseline,
        "results": {},
        "items": {},
        "params": {},
        "load_secs": load_secs,
        "max_new_tokens": max_new_tokens,
        "record": states.record,
        "attributes": states.attributes,
    }


def _run_attack(battery: dict[str, Any], name: str) -> Any:
    """Run ``name`` on the three states through the one runner (once per session) and read C-Q3 against the
    baseline on the same items."""
    from remnant import registry
    from remnant.attacks.harness import cell

    if name not in battery["results"]:
        cls = registry.get("attack", name)
        params = battery["params"][name] = BUDGETS.get(name, dict(cls.smoke_params))
        attack = registry.create("attack", name, params)
        items = battery["items"][name] = battery["probes"] if name in ALL_OF_P else battery["few"]
        t = time.perf_counter()
        res = _through_runner(battery["runner"], name, attack, battery["ctx"], battery["views"], items)
        sub = {p.item_id for p in items}
        base_sub = {
            label: cell(label, [o for o in b.outcomes if o.item_id in sub], items, 0.0)
            for label, b in battery["baseline"].items()
        }
        cq3 = _cq3(base_sub, res.states) if res.status == "run" else None
        battery["results"][name] = (res, cq3, time.perf_counter() - t)
    return battery["results"][name]


def test_attack_runs_identically_on_every_state(battery: dict[str, Any], attack_name: str) -> None:
    """One attack on the post-removal, control and pre-removal models: it ran (P is free text, so no attack may
    come back not applicable: C-Q2), counted every item on every state (R19) with its Wilson interval, judged
    willingness where an output exists (R6), on identical inputs (C-Q4), and recovered no fictional fact on the
    never-trained control (§4.1)."""
    res, _, _ = _run_attack(battery, attack_name)
    assert res.status == "run", f"{attack_name}: {res.reason}"
    _check_cells(attack_name, res, battery["items"][attack_name])
    _check_identical_inputs(attack_name, res)
    for c in res.states.values():
        _check_rate(c)
    _check_control_recovers_nothing(attack_name, res)


def _table(battery: dict[str, Any], total: float) -> str:
    import torch

    probes, params = battery["probes"], battery["params"]
    lines = [
        f"SmolLM2-135M-Instruct canary battery: P = {len(probes)} items ({battery['attributes']}), seed {SEED}, "
        f"greedy max_new_tokens={battery['max_new_tokens']}, torch threads {torch.get_num_threads()}; "
        f"models loaded in {battery['load_secs']:.1f}s; attacks {total:.1f}s",
        "",
        "| attack | params | model | k/n | rate | Wilson 95% | seconds |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, c in battery["baseline"].items():
        lines.append(_row("none", "plain question", label, c))
    for name, (res, _, _) in battery["results"].items():
        if res.status != "run":
            lines.append(
                f"| {name} | {_fmt_params(params[name])} | all | not applicable: {res.reason} | | | |"
            )
            continue
        for label, c in res.states.items():
            lines.append(_row(name, _fmt_params(params[name]), label, c))
    lines += ["", "| attack | C-Q3 explanation | post Δ | pre Δ |", "|---|---|---|---|"]
    for name, (_, finding, _) in battery["results"].items():
        if finding is not None:
            pd = "" if finding.post_delta is None else f"{finding.post_delta:+.3f}"
            qd = "" if finding.pre_delta is None else f"{finding.pre_delta:+.3f}"
            lines.append(f"| {name} | {finding.explanation} | {pd} | {qd} |")
    return "\n".join(lines)


def test_every_inference_time_attack_ran(battery: dict[str, Any], tmp_path: Path) -> None:
    """The battery the issue asks for (C-Q1 and the seeds) is all there; the table and its JSON record are
    written (printed with ``-s``)."""
    expected = set(_attack_names())
    assert {
        "prefill",
        "many_shot",
        "repeated_sampling",
        "quantize",
        "gcg",
        "soft_prompt",
        "actpert",
    } <= expected
    for name in sorted(expected):  # run alone, this test still runs every attack
        _run_attack(battery, name)
    assert set(battery["results"]) == expected
    total = sum(seconds for _, _, seconds in battery["results"].values())
    table = _table(battery, total)
    print("\n" + table)
    (tmp_path / "battery.md").write_text(table + "\n")
    record = {
        "baseline": {k: _state_dict(v) for k, v in battery["baseline"].items()},
        "attacks": {
            n: {
                "status": r.status,
                "reason": r.reason,
                "states": {k: _state_dict(v) for k, v in r.states.items()},
                "cq3_same_items": vars(f) if f else None,
            }
            for n, (r, f, _) in battery["results"].items()
        },
        "seconds_total": total,
    }
    (tmp_path / "battery.json").write_text(json.dumps(record, indent=1, default=str))
    text = (tmp_path / "battery.md").read_text()
    assert all(f"| {n} |" in text for n in expected)
    assert json.loads((tmp_path / "battery.json").read_text())["attacks"].keys() == expected


def _check_cells(name: str, res: Any, items: Sequence[Any]) -> None:
    from remnant.standard.vocabulary import CONTROL, POST, PRE

    ids = [p.item_id for p in items]
    assert set(res.states) == {POST, CONTROL, PRE}, name
    for label, c in res.states.items():
        assert c.kappa.n == len(items), (name, label)
        assert [o.item_id for o in c.outcomes] == ids, (name, label)
        assert c.seconds > 0, (name, label)
        # willingness is judged separately wherever an output exists (R6)
        if c.expected_k is None:
            assert c.willing is not None and c.willing.n == len(items), (name, label)


def _check_identical_inputs(name: str, res: Any) -> None:
    """C-Q4: same items, same demonstrations, prefixes, seeds and targets on every state."""
    cells = list(res.states.values())
    for key in INPUT_KEYS.get(name, ()):
        first = [o.extra.get(key) for o in cells[0].outcomes]
        assert all(v is not None for v in first), (name, key)
        for other in cells[1:]:
            assert [o.extra.get(key) for o in other.outcomes] == first, (name, key, other.state)


def _check_rate(c: Any) -> None:
    from remnant.stats import wilson_interval

    r = c.kappa
    assert 0.0 <= r.point <= 1.0
    assert 0.0 <= r.lo <= r.point <= r.hi <= 1.0
    assert (r.lo, r.hi) == pytest.approx(wilson_interval(r.k, r.n))  # R19: the one Wilson implementation
    if c.expected_k is not None:  # analytic: per-item probabilities, k the rounded expected count
        assert all(0.0 <= float(o.kappa) <= 1.0 for o in c.outcomes)
        assert r.k == round(c.expected_k)


def _check_control_recovers_nothing(name: str, res: Any) -> None:
    """No attack may make the control "recover" fictional facts it never saw: that would mean the attack leaks
    the answer into its inputs (§4.1). A third of the items is far above any guessing rate for a town."""
    from remnant.standard.vocabulary import CONTROL

    ctrl = res.states[CONTROL]
    assert ctrl.kappa.k <= max(1, ctrl.kappa.n // 3), (name, ctrl.kappa)


def test_baselines_bracket_the_battery(battery: dict[str, Any]) -> None:
    """The pre-removal model answers P, the never-trained control does not: without that contrast no attack
    rate can be read (the canary answers are fictional, so the control can only guess them)."""
    from remnant.standard.vocabulary import CONTROL, POST, PRE

    base = battery["baseline"]
    n = len(battery["probes"])
    assert base[PRE].kappa.n == n == base[CONTROL].kappa.n
    assert base[PRE].kappa.point >= 0.7, base[PRE].kappa
    assert base[CONTROL].kappa.k <= 1, base[CONTROL].kappa
    for c in base.values():
        _check_rate(c)
    # A teacher-forced greedy hit (what the states' record measured on P) implies a generated hit: fewer
    # generated hits than the record means the battery's generation budget or prompts lose answers.
    record = battery["record"]
    for label, key in ((PRE, "installed"), (POST, "npo_scores"), (CONTROL, "control")):
        assert base[label].kappa.k >= record[key]["P"][0], (label, base[label].kappa, record[key]["P"])
