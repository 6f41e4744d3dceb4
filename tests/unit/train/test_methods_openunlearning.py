"""``compat="openunlearning"`` reproduces OpenUnlearning's losses (docs/methods.md; R23, R24 record it).

Each method's loss on a right-padded micro-batch (padding present in forget, retain and alternate rows) is compared
with a naive computation of their trainer's formula written here from their code's semantics — per-sequence loops,
explicit masks, float64 — to 1e-5. Remnant's default (``compat="remnant"``) differs exactly where docs/methods.md
says: the KL retain term on padded batches, RMU's reduction when answer lengths differ, UNDIAL's positions; and
agrees everywhere else, and on an unpadded single row for all but UNDIAL.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from _methods_installed import micro_batch

from remnant import registry
from remnant.errors import ConfigError
from remnant.train.methods.base import MethodBatch, StepContext
from remnant.train.removal import frozen_copy

LAYER = 1  # the tiny Llama has blocks 0 and 1
Batch = dict[str, torch.Tensor]


@dataclass(frozen=True)
class Setup:
    policy: Any  # the model being trained, moved away from the reference so ratios and KL are not zero
    reference: Any
    padded: MethodBatch  # four rows of each, right-padded
    single: MethodBatch  # one row of each: no padding


@pytest.fixture(scope="module")
def setup(tiny_llama: Any) -> Setup:
    reference = frozen_copy(tiny_llama.model)
    policy = copy.deepcopy(tiny_llama.model)
    gen = torch.Generator().manual_seed(11)
    with torch.no_grad():
        for p in policy.parameters():
            p.add_(0.15 * torch.randn(p.shape, generator=gen))
    policy.eval()
    padded = micro_batch(tiny_llama.tokenizer, 4)
    for part in (padded.forget, padded.retain, padded.alternate):
        assert part is not None and bool((part["attention_mask"] == 0).any())  # padding present in every part
    return Setup(policy, reference, padded, micro_batch(tiny_llama.tokenizer, 1))


# -- naive OpenUnlearning, from their code's semantics ---------------------------------------------------------


_MEMO: dict[tuple[int, int, str], tuple[Any, torch.Tensor, torch.Tensor]] = {}


def _memo(model: Any, b: Batch, what: str, compute: Any) -> torch.Tensor:
    """One forward per (model, batch, readout) for the whole module: the naive loops read the same logits often."""
    key = (id(model), id(b["input_ids"]), what)
    hit = _MEMO.get(key)
    if hit is not None and hit[0] is model and hit[1] is b["input_ids"]:
        return hit[2]
    value: torch.Tensor = compute()
    _MEMO[key] = (model, b["input_ids"], value)
    return value


def _logits(model: Any, b: Batch) -> torch.Tensor:
    def forward() -> torch.Tensor:
        with torch.no_grad():
            logits: torch.Tensor = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits
        return logits.double()

    return _memo(model, b, "logits", forward)


def _seq_nll(logits: torch.Tensor, labels: torch.Tensor) -> list[float]:
    """``compute_batch_nll``: per sequence, the sum over t of −log p(labels[t+1] | ≤ t) where the label is real."""
    out = []
    for b in range(labels.shape[0]):
        s = 0.0
        for t in range(labels.shape[1] - 1):
            y = int(labels[b, t + 1])
            if y != -100:
                s -= float(F.log_softmax(logits[b, t], dim=-1)[y])
        out.append(s)
    return out


def _nll_mean(logits: torch.Tensor, labels: torch.Tensor) -> float:
    """HF's ``outputs.loss``: every real next-token label of the batch, one mean."""
    total, count = 0.0, 0
    for b in range(labels.shape[0]):
        for t in range(labels.shape[1] - 1):
            y = int(labels[b, t + 1])
            if y != -100:
                total -= float(F.log_softmax(logits[b, t], dim=-1)[y])
                count += 1
    return total / count


def _kl_all_positions(s: Setup, b: Batch) -> float:
    """``compute_kl_divergence``: F.kl_div(..., "batchmean", log_target=True) on [B·T, V] rows — padding included."""
    lp = F.log_softmax(_logits(s.policy, b), dim=-1)
    lq = F.log_softmax(_logits(s.reference, b), dim=-1)
    rows, total = 0, 0.0
    for i in range(lp.shape[0]):
        for t in range(lp.shape[1]):
            total += float((lq[i, t].exp() * (lq[i, t] - lp[i, t])).sum())
            rows += 1
    return total / rows


def _kl_attended(s: Setup, b: Batch) -> float:
    """Remnant's KL: the same per-position KL, averaged over attended positions only."""
    lp = F.log_softmax(_logits(s.policy, b), dim=-1)
    lq = F.log_softmax(_logits(s.reference, b), dim=-1)
    kept = [(i, t) for i in range(lp.shape[0]) for t in range(lp.shape[1]) if int(b["attention_mask"][i, t])]
    return sum(float((lq[i, t].exp() * (lq[i, t] - lp[i, t])).sum()) for i, t in kept) / len(kept)


def _retain(s: Setup, b: Batch, kind: str) -> float:
    return _kl_all_positions(s, b) if kind == "KL" else _nll_mean(_logits(s.policy, b), b["labels"])


def _log_ratios(s: Setup, b: Batch) -> list[float]:
    mine, ref = _seq_nll(_logits(s.policy, b), b["labels"]), _seq_nll(_logits(s.reference, b), b["labels"])
    return [-(m - r) for m, r in zip(mine, ref, strict=True)]


def _logsigmoid(x: float) -> float:
    return -math.log1p(math.exp(-x)) if x >= 0 else x - math.log1p(math.exp(x))


@contextmanager
def _hooked(model: Any, layer: int) -> Iterator[list[torch.Tensor]]:
    """``forward_with_cache``: a forward hook on block ``layer`` keeping its output (first element of a tuple)."""
    cache: list[torch.Tensor] = []

    def hook(module: Any, inputs: Any, output: Any) -> None:
        cache.append(output[0] if isinstance(output, tuple) else output)

    handle = model.model.layers[layer].register_forward_hook(hook)
    try:
        yield cache
    finally:
        handle.remove()


def _block(model: Any, b: Batch) -> torch.Tensor:
    def forward() -> torch.Tensor:
        with _hooked(model, LAYER) as cache, torch.no_grad():
            model(input_ids=b["input_ids"], attention_mask=b["attention_mask"])
        return cache[0].double()

    return _memo(model, b, "block", forward)


def _activation_loss(h: torch.Tensor, target: torch.Tensor, labels: torch.Tensor) -> float:
    """``compute_activation_loss``: S_j summed over answer positions, divided by the [B, 1] counts, [B, B] mean."""
    sums, counts = [], []
    for j in range(h.shape[0]):
        s, n = 0.0, 0
        for t in range(h.shape[1]):
            if int(labels[j, t]) != -100:
                tgt = target if target.dim() == 1 else target[j, t]
                s += float(((h[j, t] - tgt) ** 2).mean())
                n += 1
        sums.append(s)
        counts.append(n)
    return sum(sj / ni for ni in counts for sj in sums) / len(sums) ** 2


def _undial_naive(z: torch.Tensor, zr: torch.Tensor, labels: torch.Tensor, beta: float) -> float:
    """``compute_undial_loss``: every (b, t < T-1), the one-hot at labels[t+1] as an index (−100 wraps to V−100)."""
    vocab, total, n = z.shape[-1], 0.0, 0
    for i in range(z.shape[0]):
        for t in range(z.shape[1] - 1):
            y = int(labels[i, t + 1])
            teacher = zr[i, t].double().clone()
            teacher[y if y >= 0 else vocab + y] -= beta
            q = F.softmax(teacher, dim=-1)
            total -= float((q * F.log_softmax(z[i, t].double(), dim=-1)).sum())
            n += 1
    return total / n


def _undial(s: Setup, b: Batch, beta: float) -> float:
    return _undial_naive(_logits(s.policy, b), _logits(s.reference, b), b["labels"], beta)


def _reweighted(s: Setup, b: Batch, weight: Any) -> float:
    """``compute_wga_loss`` / ``compute_satimp_loss``: −mean over real labels of w(p_t)·CE_t."""
    z, labels = _logits(s.policy, b), b["labels"]
    total, n = 0.0, 0
    for i in range(z.shape[0]):
        for t in range(z.shape[1] - 1):
            y = int(labels[i, t + 1])
            if y != -100:
                ce = -float(F.log_softmax(z[i, t], dim=-1)[y])
                total += weight(math.exp(-ce)) * ce
                n += 1
    return -total / n


def _ceu(s: Setup, b: Batch, skip: int) -> float:
    """``compute_batch_ceu``: answer label positions after the first ``skip``; target = softmax(z with z_y = −inf)."""
    z, labels = _logits(s.policy, b), b["labels"]
    total, n = 0.0, 0
    for i in range(z.shape[0]):
        answer = [k for k in range(labels.shape[1]) if int(labels[i, k]) != -100]
        for k in answer[skip:]:
            if k == 0:
                continue
            logits = z[i, k - 1]
            target_logits = logits.clone()
            target_logits[int(labels[i, k])] = float("-inf")
            target = F.softmax(target_logits, dim=-1)
            total -= float((target * F.log_softmax(logits, dim=-1)).sum())
            n += 1
    return total / n


def _pdu_forget(s: Setup, b: Batch) -> float:
    """PDU's forget term: (max − mean)² of the logits at positions whose (unshifted) label is real, one mean."""
    z, labels = _logits(s.policy, b), b["labels"]
    vals = [
        float((z[i, t].max() - z[i, t].mean()) ** 2)
        for i in range(z.shape[0])
        for t in range(z.shape[1])
        if int(labels[i, t]) != -100
    ]
    return sum(vals) / len(vals)


def openunlearning_loss(name: str, p: dict[str, Any], s: Setup, mb: MethodBatch, ctx: StepContext) -> float:
    """Their ``compute_loss`` for method ``name`` with hyperparameters ``p`` (every default filled in)."""
    f, r, alt = mb.forget, mb.retain, mb.alternate
    assert r is not None and alt is not None
    kind = p.get("retain_loss_type", "NLL")
    if name == "grad_ascent":
        return -_nll_mean(_logits(s.policy, f), f["labels"])
    if name == "ceu":
        return _ceu(s, f, p["ignore_first_n_answer_tokens"])
    if name == "pdu":
        return float(
            p["gamma"] * _pdu_forget(s, f) + p["alpha"] * (_retain(s, r, kind) - p["retain_loss_eps"])
        )
    if name == "rmu":
        control = ctx.state["rmu_control_vector"].double()
        forget = _activation_loss(_block(s.policy, f), control, f["labels"])
        if kind == "EMBED_DIFF":
            retain = _activation_loss(_block(s.policy, r), _block(s.reference, r), r["labels"])
        else:
            retain = _retain(s, r, kind)
        return float(p["gamma"] * forget + p["alpha"] * retain)
    if name == "grad_diff":
        forget = -_nll_mean(_logits(s.policy, f), f["labels"])
    elif name == "npo":
        ratios = _log_ratios(s, f)
        forget = -2 / p["beta"] * sum(_logsigmoid(-p["beta"] * x) for x in ratios) / len(ratios)
    elif name == "simnpo":
        counts = (f["labels"] != -100).sum(-1).tolist()  # unshifted labels, as simnpo.py counts them
        a = [
            x / c - p["delta"]
            for x, c in zip(_seq_nll(_logits(s.policy, f), f["labels"]), counts, strict=True)
        ]
        forget = -2 / p["beta"] * sum(_logsigmoid(p["beta"] * x) for x in a) / len(a)
    elif name in ("idk_dpo", "altpo"):
        win, lose = _log_ratios(s, alt), _log_ratios(s, f)
        terms = [_logsigmoid(p["beta"] * (w - lo)) for w, lo in zip(win, lose, strict=True)]
        forget = -2 / p["beta"] * sum(terms) / len(terms)
    elif name == "idk_nll":
        forget = _nll_mean(_logits(s.policy, alt), alt["labels"])
    elif name == "undial":
        forget = _undial(s, f, p["beta"])
    elif name == "wga":
        forget = _reweighted(s, f, lambda q: q ** p["beta"])
    elif name == "satimp":
        forget = _reweighted(s, f, lambda q: q ** p["beta1"] * (1 - q) ** p["beta2"])
    else:
        raise AssertionError(f"no naive reference for {name}")
    retain = _retain(s, r, kind) if p["alpha"] else 0.0
    return float(p["gamma"] * forget + p["alpha"] * retain)


# -- the cases -------------------------------------------------------------------------------------------------

KL = {"retain_loss_type": "KL"}
#: (method, parameters, does remnant's default differ from compat on the padded batch?)
CASES: list[tuple[str, dict[str, Any], bool]] = [
    ("grad_ascent", {}, False),
    ("grad_diff", {}, False),
    ("grad_diff", KL, True),
    ("npo", {}, False),
    ("npo", KL, True),
    ("simnpo", {"delta": 0.5}, False),
    ("simnpo", {**KL, "delta": 0.5}, True),
    ("idk_dpo", {}, False),
    ("idk_dpo", KL, True),
    ("altpo", {}, False),
    ("altpo", KL, True),
    ("idk_nll", {}, False),
    ("idk_nll", KL, True),
    ("rmu", {"layer": LAYER}, True),
    ("rmu", {"layer": LAYER, **KL}, True),
    ("undial", {}, True),
    ("undial", {"alpha": 1.0, **KL}, True),
    ("wga", {}, False),
    ("wga", KL, True),
    ("satimp", {}, False),
    ("satimp", KL, True),
    ("ceu", {}, False),
    ("pdu", {"retain_loss_eps": 0.3}, False),
    ("pdu", {"retain_loss_eps": 0.3, **KL}, True),
]
IDS = [f"{n}-{p.get('retain_loss_type', 'default')}" for n, p, _ in CASES]


def _loss(
    s: Setup, name: str, params: dict[str, Any], compat: str, mb: MethodBatch
) -> tuple[float, StepContext]:
    method = registry.create("method", name, {**params, "compat": compat})
    ctx = StepContext(reference=s.reference, generator=torch.Generator().manual_seed(5))
    method.setup(s.policy, ctx)
    with torch.no_grad():
        return float(method.loss(s.policy, mb, ctx).loss), ctx


@pytest.mark.parametrize(("name", "params", "differs"), CASES, ids=IDS)
def test_compat_loss_equals_naive_openunlearning(
    setup: Setup, name: str, params: dict[str, Any], differs: bool
) -> None:
    got, ctx = _loss(setup, name, params, "openunlearning", setup.padded)
    full = {**registry.defaults("method", name), **params}
    want = openunlearning_loss(name, full, setup, setup.padded, ctx)
    assert got == pytest.approx(want, rel=1e-5, abs=1e-6), (name, got, want)


@pytest.mark.parametrize(("name", "params", "differs"), CASES, ids=IDS)
def test_default_differs_from_compat_exactly_where_documented(
    setup: Setup, name: str, params: dict[str, Any], differs: bool
) -> None:
    """On the padded batch they differ where ``differs`` says; on one unpadded row they agree, except UNDIAL
    (which adjusts the prompt positions too under compat)."""
    ours, _ = _loss(setup, name, params, "remnant", setup.padded)
    theirs, _ = _loss(setup, name, params, "openunlearning", setup.padded)
    if differs:
        assert abs(ours - theirs) > 1e-3, (name, ours, theirs)
    else:
        assert ours == pytest.approx(theirs, rel=1e-6, abs=1e-7), (name, ours, theirs)
    ours, _ = _loss(setup, name, params, "remnant", setup.single)
    theirs, _ = _loss(setup, name, params, "openunlearning", setup.single)
    if name == "undial":
        assert abs(ours - theirs) > 1e-3
    else:
        assert ours == pytest.approx(theirs, rel=1e-6, abs=1e-7), ("single row", name, ours, theirs)


def test_remnant_kl_is_the_attended_mean_and_theirs_counts_padding(setup: Setup) -> None:
    """The documented difference itself: KL over attended positions vs sum over all B·T rows / (B·T)."""
    r = setup.padded.retain
    assert r is not None
    method = registry.create("method", "grad_diff", {**KL, "gamma": 0.0})
    ctx = StepContext(reference=setup.reference, generator=torch.Generator())
    with torch.no_grad():
        ours = float(method.loss(setup.policy, setup.padded, ctx).loss)
    assert ours == pytest.approx(_kl_attended(setup, r), rel=1e-5)
    assert abs(_kl_all_positions(setup, r) - _kl_attended(setup, r)) > 1e-3


def test_undial_compat_lowers_index_v_minus_100_where_the_label_is_ignored() -> None:
    """Their one-hot scatter at label −100 lands on vocabulary index V − 100 (negative indices wrap): where the
    teacher puts mass there, compat moves the loss and the naive reference agrees."""
    from remnant.train.methods.undial_loss import undial_loss, undial_loss_openunlearning

    gen = torch.Generator().manual_seed(3)
    vocab = 120
    z = torch.randn(2, 6, vocab, generator=gen)
    zr = torch.randn(2, 6, vocab, generator=gen)
    z[..., vocab - 100] += 6.0  # student and teacher both favour the token the quirk penalises
    zr[..., vocab - 100] += 6.0
    labels = torch.tensor([[-100, -100, 5, 9, 2, -100], [-100, -100, -100, 7, 1, 4]])
    got = float(undial_loss_openunlearning(z, zr, labels, 10.0))
    assert got == pytest.approx(_undial_naive(z, zr, labels, 10.0), rel=1e-5)
    # the same positions with no penalty at V - 100: remnant's positions="all"
    unwrapped = float(undial_loss(z, zr, labels, 10.0, positions="all"))
    assert abs(got - unwrapped) > 0.1
    with pytest.raises(ValueError, match="vocabulary"):
        undial_loss_openunlearning(
            z[..., :90], zr[..., :90], labels, 10.0
        )  # V < 100: their index is invalid too


def test_naive_nll_is_the_hf_loss_their_gradascent_negates(setup: Setup) -> None:
    f = setup.padded.forget
    with torch.no_grad():
        hf = float(
            setup.policy(
                input_ids=f["input_ids"], attention_mask=f["attention_mask"], labels=f["labels"]
            ).loss
        )
    assert hf == pytest.approx(_nll_mean(_logits(setup.policy, f), f["labels"]), rel=1e-5)


def test_every_method_with_an_openunlearning_counterpart_takes_compat_and_is_covered() -> None:
    with_compat = {n for n in registry.names("method") if "compat" in registry.defaults("method", n)}
    assert with_compat == {n for n, _, _ in CASES}
    assert set(registry.names("method")) - with_compat == {
        "retrain",
        "task_vector",
    }  # procedures, no counterpart
    for name in with_compat:
        assert (
            registry.defaults("method", name)["compat"] == "remnant"
        )  # recorded assessments keep their numbers
        spec = registry.bind("method", name, {"compat": "openunlearning"})
        assert spec.params["compat"] == "openunlearning"
    with pytest.raises(ConfigError, match="compat"):
        registry.create("method", "npo", {"compat": "OpenUnlearning"})


@pytest.mark.parametrize(
    ("name", "params"),
    [("grad_diff", KL), ("rmu", {"layer": LAYER}), ("undial", {"lr": 2e-3})],
)
def test_compat_runs_train_and_are_recorded(tiny_llama: Any, name: str, params: dict[str, Any]) -> None:
    from _methods_tiny import removal_data, run_method

    run = run_method(tiny_llama, name, {**params, "compat": "openunlearning"}, removal_data())
    default = run_method(tiny_llama, name, params, removal_data())
    assert run.result.status == "completed" and run.result.method["params"]["compat"] == "openunlearning"
    assert default.result.method["params"]["compat"] == "remnant"
    # same data order and seed, different loss definitions: the runs part (for the KL term once the model has
    # moved from the reference: at step 0 the two are equal and KL is 0 under both)
    assert run.result.outcome.losses != pytest.approx(default.result.outcome.losses, rel=1e-6)
