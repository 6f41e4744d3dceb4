"""J-Access (Liu et al., arXiv 2608.11408; the J-Access paper, eqs. 3–6) and its logit-lens comparator. Non-adjudicating.

Per probe ``x_i`` (a query that implicates a forget-set entity without naming it) with concept tokens ``C_i``:
the lens readout ``z_{l,p}`` at every layer of the workspace band ``B`` and readout position ``P``; access
``a_i = 1[∃ l∈B, p∈P, t∈C_i : rank_t(z_{l,p}) ≤ k]`` (eq. 3); the behaviourally silent probes
``I(θ) = {i : θ emits no token of C_i}`` (eq. 4, greedy continuation); the raw access rate ``A_k(φ; I)`` (eq. 5);
and ``JOcc(θ) = (A(θ; I(θ)) − A(θ_g; I(θ))) / (A(θ_0; I(θ)) − A(θ_g; I(θ)))`` with both anchors read on the
*audited* model's silent subset, reported unclipped (eq. 6) and, beside it, clipped to [0, 1]. Beside JOcc each
result carries A(θ) − A(θ_g) with Newcombe's paired interval and the one-sided exact McNemar p-value of "A(θ)
above A(θ_g)" on the same probes (the per-model test that :mod:`remnant.latent.jaccess_grid` Holm-adjusts across
audited checkpoints, as the paper's Table 1 does [R: the paper does not name its test]).

:func:`make_probe` is remnant's *answer-level* probe (a question naming the person, C_i = first tokens of the
answer); the paper's identity-level probes are :mod:`remnant.latent.jaccess_probes`. Whose J reads a model is the
caller's choice, recorded in :attr:`AccessReadout.lens_model`; ``lens=None`` is the logit lens (J = I), the
paper's comparator. Defaults where the paper defers to its appendix are ours [R]: the band 25–90 % of depth when
not calibrated, the last 8 prompt positions.

J-Access is a measurement only: everything here runs without gradients, and it is deliberately not offered as a
loss (the J-Access paper, Test 3: minimising it teaches the model to hide knowledge from the audit).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field

from remnant.latent.cache import model_digest
from remnant.latent.jacobian_lens import JacobianLens, readout
from remnant.models.arch import resolve_parts
from remnant.models.hooks import block_outputs
from remnant.models.prompts import render_prompt_ids

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from remnant.models.prompts import PromptFormat
    from remnant.packs.schema import Item

STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "in",
        "on",
        "at",
        "to",
        "for",
        "and",
        "or",
        "is",
        "was",
        "are",
        "be",
        "by",
        "with",
        "from",
        "as",
        "it",
        "he",
        "she",
        "they",
        "his",
        "her",
        "their",
        "this",
        "that",
    ]
)


@dataclass(frozen=True)
class Probe:
    """One audit probe: prompt ids (no answer), the concept token set C_i, the pack entity it implicates (the band
    calibration refuses calibration probes about an audited entity) and how C_i was built (``level``)."""

    idx: str
    prompt_ids: tuple[int, ...]
    concept_ids: frozenset[int]
    entity: str | None = None
    level: str = "unspecified"


def piece_token_ids(
    tokenizer: Any, pieces: Iterable[str], prompt_ids: Sequence[int], *, all_tokens: bool, min_chars: int = 1
) -> frozenset[int]:
    """The tokens (every one, or the first) of each piece, tokenised bare and with a leading space, kept if the
    decoded text, stripped, has at least ``min_chars`` characters and is no stop word, digits only, special token
    or token of the prompt: the one tokenisation rule of both concept-set levels."""
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    in_prompt = set(prompt_ids)
    out: set[int] = set()
    for piece in dict.fromkeys(pieces):
        for variant in (piece, " " + piece):
            ids = list(tokenizer(variant, add_special_tokens=False)["input_ids"])
            for tid in ids if all_tokens else ids[:1]:
                text = tokenizer.decode([tid]).strip()
                if tid in special or tid in in_prompt or len(text) < min_chars:
                    continue
                if text.isdigit() or text.lower() in STOP_WORDS:
                    continue
                out.add(int(tid))
    return frozenset(out)


def concept_token_ids(
    tokenizer: Any, names: Sequence[str], prompt_ids: Sequence[int], *, all_tokens: bool = False
) -> frozenset[int]:
    """remnant's answer-level C_i: :func:`piece_token_ids` of each given string and its whitespace pieces."""
    pieces = [p for name in names for p in (name, *name.split())]
    return piece_token_ids(tokenizer, pieces, prompt_ids, all_tokens=all_tokens)


class FirstPieceScreen:
    """A pack town screen (``mint_class_d(accept_town=...)``) that makes first-token concept sets readable.

    When the answer-level C_i (:func:`make_probe`) is a single letter (" K", "V") every model puts it in the top-k
    on most questions about people, and when two towns share it a model that learned one reads as having access to
    the other; either way the retain-only anchor is not ignorant of the forget answers (docs/latent.md). This
    screen accepts a name only if its first token, with and without a leading space, decodes to at least
    ``min_chars`` characters and was no accepted name's first token. Stateful: one instance per mint.
    """

    def __init__(self, tokenizer: Any, min_chars: int = 3) -> None:
        self.tokenizer = tokenizer
        self.min_chars = min_chars
        self.taken: set[int] = set()

    @property
    def description(self) -> str:
        # no name_or_path: it is a local folder, and the pack's digest must not depend on where a model is cached
        return (
            f"first token of the name with and without a leading space decodes to >= {self.min_chars} characters "
            f"and is no other town's first token ({type(self.tokenizer).__name__}, vocabulary {len(self.tokenizer)})"
        )

    def first_ids(self, name: str) -> tuple[int, int]:
        bare, spaced = (
            self.tokenizer(v, add_special_tokens=False)["input_ids"][0] for v in (name, " " + name)
        )
        return int(bare), int(spaced)

    def __call__(self, name: str) -> bool:
        ids = self.first_ids(name)
        if any(len(self.tokenizer.decode([t]).strip()) < self.min_chars for t in ids):
            return False
        if self.taken.intersection(ids):
            return False
        self.taken.update(ids)
        return True


def make_probe(
    tokenizer: PreTrainedTokenizerBase, idx: str, prompt_ids: Sequence[int], names: Sequence[str]
) -> Probe:
    """An answer-level probe: C_i is the names' first tokens (:func:`concept_token_ids`); the prompt is not
    checked (it names the person)."""
    return Probe(idx, tuple(prompt_ids), concept_token_ids(tokenizer, names, prompt_ids))


def answer_probes(
    tokenizer: PreTrainedTokenizerBase, items: Iterable[Item], fmt: PromptFormat
) -> list[Probe]:
    """remnant's answer-level probes on pack items: each question rendered in ``fmt``, read for its answers."""
    return [
        make_probe(tokenizer, it.id, render_prompt_ids(tokenizer, it.question, fmt), list(it.accepted))
        for it in items
    ]


@dataclass(frozen=True)
class AccessConfig:
    """Readout settings [R defaults, the J-Access paper, Appendix A not available]."""

    k: int = 10
    band: tuple[float, float] = (0.25, 0.9)
    layers: tuple[int, ...] | None = None
    positions: int = 8
    max_new_tokens: int = 32


class ProbeReadout(BaseModel):
    """One probe read through one model's lens."""

    model_config = ConfigDict(extra="forbid")

    idx: str = Field(description="Probe id.")
    hit: bool = Field(
        description="a_i^(k): some concept token in the top-k at some (layer, position) (eq. 3)."
    )
    best_rank: int = Field(description="Best (smallest) rank of any concept token over the band.")
    occupancy: float = Field(description="Fraction of (layer, position) cells with a hit.")
    emitted: bool = Field(description="The model's greedy continuation contains a concept token (eq. 4).")
    n_concepts: int = Field(description="|C_i|.")


class AccessReadout(BaseModel):
    """All probes read through one model's own lens."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(description="Weights digest of the model read.")
    lens: Literal["jacobian", "logit"] = Field(
        description="Jacobian lens (own fitted J) or logit lens (J = I)."
    )
    target_layer: int | None = Field(
        description="The Jacobian lens's target layer T (None for the logit lens)."
    )
    lens_model: str | None = Field(
        default=None,
        description="Weights digest of the model whose J was fitted (None for the logit lens): the model read "
        "itself (own lens) or a fixed decoder such as the original model's.",
    )
    layers: list[int] = Field(description="Workspace band B (0-based block outputs).")
    positions: str = Field(description="Readout positions P.")
    k: int = Field(description="Top-k.")
    probes: list[ProbeReadout] = Field(description="Per-probe readouts.")


def band_layers(model: PreTrainedModel, cfg: AccessConfig, lens: JacobianLens | None) -> list[int]:
    """Layers of the band (fractions of depth), limited to the lens's source layers when a lens is given."""
    n = len(resolve_parts(model).blocks)
    if cfg.layers is not None:
        layers = list(cfg.layers)
    else:
        lo, hi = cfg.band
        layers = [layer for layer in range(n) if lo * (n - 1) <= layer <= hi * (n - 1)]
    if lens is not None:
        layers = [layer for layer in layers if layer in lens.matrices]
    if not layers:
        raise ValueError("J-Access: the workspace band is empty for this model and lens")
    return layers


def greedy_continuations(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    probes: Sequence[Probe],
    max_new_tokens: int = 32,
) -> list[tuple[int, ...]]:
    """Each probe's greedy continuation: what eq. 4 checks. It does not depend on C_i, so one generation serves
    every concept-set variant of the same prompts."""
    from remnant.score.capability import generate_greedy_ids

    return [
        tuple(generate_greedy_ids(model, tokenizer, p.prompt_ids, max_new_tokens=max_new_tokens))
        for p in probes
    ]


def emitted_flags(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    probes: Sequence[Probe],
    max_new_tokens: int = 32,
    *,
    continuations: Sequence[Sequence[int]] | None = None,
) -> list[bool]:
    """Eq. 4's behaviour, once per model: does the greedy continuation (given, or generated) emit a token of C_i?"""
    if continuations is None:
        continuations = greedy_continuations(model, tokenizer, probes, max_new_tokens)
    return [any(t in p.concept_ids for t in gen) for p, gen in zip(probes, continuations, strict=True)]


def _band_logits(
    model: PreTrainedModel,
    prompt_ids: Sequence[int],
    layers: Sequence[int],
    lens: JacobianLens | None,
    positions: int,
) -> Iterator[torch.Tensor]:
    """One forward pass; per band layer, the lens readout ``z`` [P, V] of the last ``positions`` positions."""
    captured = block_outputs(model, prompt_ids, layers)
    n_pos = min(positions, len(prompt_ids))
    for layer in layers:
        yield readout(model, captured[layer][0, -n_pos:], lens.matrices[layer] if lens is not None else None)


class _ProbeTally:
    """Eq. 3's test for one probe, accumulated over the band's (layer, position) cells."""

    def __init__(self, concept_ids: frozenset[int], k: int) -> None:
        self.concepts = torch.tensor(sorted(concept_ids), dtype=torch.long)
        self.k = k
        self.best = 1 << 30
        self.cells = 0
        self.hits = 0

    def add(self, z: torch.Tensor) -> None:
        """Count the cells of one layer's readout ``z`` [P, V]."""
        self.cells += z.shape[0]
        if self.concepts.numel() == 0:
            return
        zc = z[:, self.concepts]  # [P, |C|]
        ranks = 1 + (z[:, None, :] > zc[:, :, None]).sum(dim=-1)  # [P, |C|]
        per_cell = ranks.min(dim=1).values
        self.best = min(self.best, int(per_cell.min()))
        self.hits += int((per_cell <= self.k).sum())

    def result(self) -> tuple[bool, int, float]:
        return self.best <= self.k, self.best, self.hits / self.cells if self.cells else 0.0


@torch.no_grad()
def read_probe(
    model: PreTrainedModel, probe: Probe, layers: Sequence[int], lens: JacobianLens | None, cfg: AccessConfig
) -> tuple[bool, int, float]:
    """(hit, best rank, occupancy) of one probe over the band and the last ``cfg.positions`` positions."""
    tally = _ProbeTally(probe.concept_ids, cfg.k)
    for z in _band_logits(model, probe.prompt_ids, layers, lens, cfg.positions):
        tally.add(z)
    return tally.result()


@torch.no_grad()
def layer_hits(
    model: PreTrainedModel, probe: Probe, layers: Sequence[int], lens: JacobianLens | None, cfg: AccessConfig
) -> dict[int, bool]:
    """Eq. 3's test layer by layer: {layer: some concept token in the top-k at some readout position}. A band's
    ``a_i`` is the OR of its layers' entries (eq. 3's ∃ over l), which is what the band calibration uses."""
    out: dict[int, bool] = {}
    for layer, z in zip(
        layers, _band_logits(model, probe.prompt_ids, layers, lens, cfg.positions), strict=True
    ):
        tally = _ProbeTally(probe.concept_ids, cfg.k)
        tally.add(z)
        out[layer] = tally.result()[0]
    return out


@torch.no_grad()
def token_hit_rates(
    model: PreTrainedModel,
    prompts: Sequence[Sequence[int]],
    tokens: Sequence[int],
    lens: JacobianLens | None,
    cfg: AccessConfig | None = None,
) -> dict[int, float]:
    """Per token: the share of ``prompts`` on which it enters the top-k at some band cell (eq. 3's test, token by
    token). Read on unrelated (decoy) prompts this is the per-token baseline of docs/latent.md: a token that
    surfaces for questions about people who have no link to it (a one-letter name start, " the") is generic, and
    a hit on it says nothing about the target."""
    cfg = cfg or AccessConfig()
    layers = band_layers(model, cfg, lens)
    ids = torch.tensor(sorted(set(int(t) for t in tokens)), dtype=torch.long)
    counts = torch.zeros(ids.numel(), dtype=torch.long)
    for prompt in prompts:
        seen = torch.zeros(ids.numel(), dtype=torch.bool)
        for z in _band_logits(model, prompt, layers, lens, cfg.positions):
            kth = z.topk(cfg.k, dim=-1).values[:, -1:]  # [P, 1]: the k-th largest logit per cell
            seen |= (z[:, ids] >= kth).any(dim=0)
        counts += seen.long()
    n = max(1, len(prompts))
    return {int(t): float(c) / n for t, c in zip(ids.tolist(), counts.tolist(), strict=True)}


def drop_generic(probes: Sequence[Probe], rates: dict[int, float], max_rate: float) -> list[Probe]:
    """The probes with every concept token whose decoy hit rate exceeds ``max_rate`` removed from C_i; a probe
    left with an empty C_i stays (it is counted, and :func:`silent_set` leaves it out)."""
    return [
        replace(p, concept_ids=frozenset(t for t in p.concept_ids if rates.get(t, 0.0) <= max_rate))
        for p in probes
    ]


def read_access(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    probes: Sequence[Probe],
    lens: JacobianLens | None,
    cfg: AccessConfig | None = None,
    *,
    emitted: Sequence[bool] | None = None,
    digest: str | None = None,
) -> AccessReadout:
    """Read every probe through ``model``'s lens (``None`` = logit lens); ``emitted`` may be given precomputed."""
    cfg = cfg or AccessConfig()
    said = (
        list(emitted) if emitted is not None else emitted_flags(model, tokenizer, probes, cfg.max_new_tokens)
    )
    return _read_variants(model, [(probes, lens)], cfg, [said], digest)[0]


def read_access_many(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    variants: Sequence[tuple[Sequence[Probe], JacobianLens | None]],
    cfg: AccessConfig | None = None,
    *,
    continuations: Sequence[Sequence[int]] | None = None,
    digest: str | None = None,
) -> list[AccessReadout]:
    """Several readouts of one model on the same prompts from one forward pass per prompt and one greedy
    continuation (eq. 4): each variant is (probes, lens), and its readout equals :func:`read_access` of it."""
    cfg = cfg or AccessConfig()
    if not variants:
        return []
    first = variants[0][0]
    for probes, _ in variants:
        if [p.prompt_ids for p in probes] != [p.prompt_ids for p in first]:
            raise ValueError("read_access_many: every variant must hold the same prompts in the same order")
    if continuations is None:
        continuations = greedy_continuations(model, tokenizer, first, cfg.max_new_tokens)
    said = [emitted_flags(model, tokenizer, probes, continuations=continuations) for probes, _ in variants]
    return _read_variants(model, variants, cfg, said, digest)


@torch.no_grad()
def _read_variants(
    model: PreTrainedModel,
    variants: Sequence[tuple[Sequence[Probe], JacobianLens | None]],
    cfg: AccessConfig,
    emitted: Sequence[Sequence[bool]],
    digest: str | None,
) -> list[AccessReadout]:
    """Eq. 3 for every variant (probes over the same prompts, lens): one forward pass per prompt captures the
    union of the variants' bands; each distinct lens reads each layer once for all the variants that use it."""
    layers = [band_layers(model, cfg, lens) for _, lens in variants]
    union = sorted(set().union(*layers))
    groups: dict[int, list[int]] = {}  # one readout per distinct lens object
    for v, (_, lens) in enumerate(variants):
        groups.setdefault(id(lens), []).append(v)
    rows: list[list[ProbeReadout]] = [[] for _ in variants]
    for i, prompt in enumerate(variants[0][0]):
        captured = block_outputs(model, prompt.prompt_ids, union)
        n_pos = min(cfg.positions, len(prompt.prompt_ids))
        for members in groups.values():
            lens = variants[members[0]][1]
            tallies = {v: _ProbeTally(variants[v][0][i].concept_ids, cfg.k) for v in members}
            for layer in union:
                users = [v for v in members if layer in layers[v]]
                if not users:
                    continue
                z = readout(
                    model, captured[layer][0, -n_pos:], lens.matrices[layer] if lens is not None else None
                )
                for v in users:
                    tallies[v].add(z)
            for v in members:
                probe = variants[v][0][i]
                hit, best, occ = tallies[v].result()
                rows[v].append(
                    ProbeReadout(
                        idx=probe.idx,
                        hit=hit,
                        best_rank=best,
                        occupancy=occ,
                        emitted=emitted[v][i],
                        n_concepts=len(probe.concept_ids),
                    )
                )
    name = model_digest(model, digest)
    return [
        AccessReadout(
            model=name,
            lens="jacobian" if lens is not None else "logit",
            target_layer=lens.target_layer if lens is not None else None,
            lens_model=lens.model if lens is not None else None,
            layers=layers[v],
            positions=f"last {cfg.positions} prompt positions",
            k=cfg.k,
            probes=rows[v],
        )
        for v, (_, lens) in enumerate(variants)
    ]


def is_silent(emitted: bool, n_concepts: int) -> bool:
    """Whether a probe is in I(θ): the model emits no concept token (eq. 4) and C_i is not empty (a probe with
    empty C_i is left out)."""
    return not emitted and n_concepts > 0


def silent_set(readout_: AccessReadout) -> set[str]:
    """I(θ): probes on which the model emits no concept token (eq. 4); probes with empty C_i are left out."""
    return {p.idx for p in readout_.probes if is_silent(p.emitted, p.n_concepts)}


def jocc_ratio(audited: float, original: float, retain: float) -> float | None:
    """Eq. 6, unclipped: ``(A(θ) − A(θ_g)) / (A(θ_0) − A(θ_g))`` from the three accesses on one subset; None
    where the anchors tie (the ratio is undefined)."""
    return (audited - retain) / (original - retain) if original != retain else None


def raw_access(readout_: AccessReadout, subset: set[str]) -> float | None:
    """A_k(φ; I): fraction of the subset with access (eq. 5); None for an empty subset."""
    rows = [p for p in readout_.probes if p.idx in subset]
    return sum(p.hit for p in rows) / len(rows) if rows else None


class BandCandidate(BaseModel):
    """One candidate band of the calibration: its anchors' access on the calibration probes."""

    model_config = ConfigDict(extra="forbid")

    first: int = Field(description="First block of the band (0-based block output).")
    last: int = Field(description="Last block of the band, inclusive.")
    access_original: float = Field(description="A_k(θ_0) on the calibration probes in this band.")
    access_retain: float = Field(description="A_k(θ_g) on the calibration probes in this band.")


class BandSelection(BaseModel):
    """How the workspace band B was chosen on held-out calibration entities (the J-Access paper: "a mid-to-late workspace
    band selected on held-out calibration entities"; the objective is ours [R], Appendix A being unavailable)."""

    model_config = ConfigDict(extra="forbid")

    rule: str = Field(description="The selection rule, in words.")
    region: list[int] = Field(
        description="The blocks the candidates were drawn from (the mid-to-late region)."
    )
    min_width: int = Field(description="Fewest blocks in a candidate band.")
    chosen: list[int] = Field(description="The band chosen (its blocks).")
    gap: float = Field(description="A(θ_0) − A(θ_g) on the calibration probes in the chosen band.")
    calibration_entities: list[str] = Field(
        description="Pack entities of the calibration probes (none audited)."
    )
    n_calibration_probes: int = Field(description="Calibration probes with a non-empty C_i (those counted).")
    k: int = Field(description="Top-k of the calibration readout.")
    positions: str = Field(description="Readout positions of the calibration readout.")
    original_model: str = Field(description="Weights digest of θ_0 read for the calibration.")
    retain_model: str = Field(description="Weights digest of θ_g read for the calibration.")
    lens_model: str | None = Field(
        description="Whose J the original model was read through (None: logit lens)."
    )
    candidates: list[BandCandidate] = Field(description="Every candidate band with its anchors' access.")


class JAccessResult(BaseModel):
    """JOcc of an audited model between the original and retain-only anchors (eq. 6)."""

    model_config = ConfigDict(extra="forbid")

    measurement: Literal["j_access", "logit_lens_access"] = Field(description="Jacobian lens or logit lens.")
    jocc: float | None = Field(description="Normalised access, unclipped (eq. 6); None if the anchors tie.")
    jocc_clipped: float | None = Field(description="The same clipped to [0, 1].")
    access_audited: float | None = Field(description="A_k(θ; I(θ)).")
    access_original: float | None = Field(description="A_k(θ_0; I(θ)).")
    access_retain: float | None = Field(description="A_k(θ_g; I(θ)).")
    retain_gap: float | None = Field(
        default=None,
        description="A(θ; I(θ)) − A(θ_g; I(θ)): the audited model's access above the retain-only level.",
    )
    retain_gap_ci95: tuple[float, float] | None = Field(
        default=None,
        description="Newcombe's paired 95 % interval of retain_gap: both models read on the same silent probes "
        "(stats.newcombe_paired_difference); a gap whose interval holds 0 is not resolved at this probe count.",
    )
    n_probes: int = Field(description="Probes given.")
    n_silent: int = Field(description="|I(θ)|: probes silent under the audited model.")
    k: int = Field(description="Top-k.")
    layers: list[int] = Field(description="Workspace band of the audited model's readout.")
    positions: str = Field(description="Readout positions.")
    audited_model: str = Field(description="Weights digest of θ.")
    original_model: str = Field(description="Weights digest of θ_0.")
    retain_model: str = Field(description="Weights digest of θ_g.")
    decoder: Literal["own", "fixed", "mixed", "logit"] = Field(
        default="own",
        description="Whose J each model was read through: its own (own), one shared lens (fixed), or J = I.",
    )
    provenance: str = Field(description="Provenance of the definition and defaults.")
    p_above_retain: float | None = Field(
        default=None,
        description="One-sided exact McNemar p-value of A(θ) > A(θ_g) on the audited model's silent probes "
        "(unadjusted; jaccess_grid Holm-adjusts it across audited models); None when nothing is silent.",
    )
    band_selection: BandSelection | None = Field(
        default=None,
        description="How the band was chosen on held-out calibration entities; None when it was fixed (depth "
        "fractions or given layers).",
    )
    probe_level: str | None = Field(
        default=None,
        description="How the probes and C_i were built (identity level: attribute descriptions without the name, "
        "C_i from the name), when the caller says.",
    )


def mcnemar_greater(audited_only: int, retain_only: int) -> float:
    """One-sided exact McNemar p-value of "the audited model hits more of the shared probes than the retain-only
    model": ``P(X ≥ b)`` with ``X ~ Binomial(b + c, 1/2)`` over the ``b + c`` discordant probes (``b`` hit by the
    audited model only, ``c`` by the retain-only model only); 1.0 when no probe is discordant. Exact integer
    arithmetic: the tail is a sum of binomial coefficients over ``2^(b+c)``."""
    if audited_only < 0 or retain_only < 0:
        raise ValueError(f"discordant counts must be non-negative, got {audited_only}, {retain_only}")
    n = audited_only + retain_only
    if n == 0:
        return 1.0
    return sum(math.comb(n, i) for i in range(audited_only, n + 1)) / (1 << n)


def paired_cells(
    audited: AccessReadout, retain: AccessReadout, subset: set[str]
) -> tuple[int, int, int, int]:
    """Probes of ``subset`` hit by both / the audited model only / the retain-only model only / neither."""
    hits_a = {p.idx: p.hit for p in audited.probes if p.idx in subset}
    hits_r = {p.idx: p.hit for p in retain.probes if p.idx in subset}
    pairs = [(hits_a[i], hits_r[i]) for i in sorted(hits_a) if i in hits_r]
    both, a_only, r_only, neither = (
        sum(1 for x, y in pairs if (x, y) == want) for want in ((1, 1), (1, 0), (0, 1), (0, 0))
    )
    return both, a_only, r_only, neither


def _retain_gap(
    audited: AccessReadout, retain: AccessReadout, subset: set[str]
) -> tuple[float | None, tuple[float, float] | None, float | None]:
    """A(θ) − A(θ_g) on the silent subset with its paired interval and the one-sided McNemar p-value: probe by
    probe, hit under both, one, none."""
    from remnant.stats import newcombe_paired_difference

    cells = paired_cells(audited, retain, subset)
    if not sum(cells):
        return None, None, None
    d, lo, hi = newcombe_paired_difference(*cells)
    return d, (lo, hi), mcnemar_greater(cells[1], cells[2])


def j_occ(audited: AccessReadout, original: AccessReadout, retain: AccessReadout) -> JAccessResult:
    """Eq. 6 on the audited model's silent subset; both anchors evaluated on that same subset."""
    if not audited.lens == original.lens == retain.lens:
        raise ValueError("J-Access: all three readouts must use the same kind of lens")
    subset = silent_set(audited)
    a, o, r = (raw_access(x, subset) for x in (audited, original, retain))
    lens_models = [x.lens_model for x in (audited, original, retain)]
    if audited.lens == "logit":
        decoder: Literal["own", "fixed", "mixed", "logit"] = "logit"
    elif len(set(lens_models)) == 1 and lens_models[0] is not None:
        decoder = "fixed"
    elif all(x.lens_model in (None, x.model) for x in (audited, original, retain)):
        decoder = "own"
    else:
        decoder = "mixed"
    jocc = jocc_ratio(a, o, r) if a is not None and o is not None and r is not None else None
    gap, gap_ci, p_above = _retain_gap(audited, retain, subset)
    return JAccessResult(
        measurement="j_access" if audited.lens == "jacobian" else "logit_lens_access",
        jocc=jocc,
        jocc_clipped=min(max(jocc, 0.0), 1.0) if jocc is not None else None,
        access_audited=a,
        access_original=o,
        access_retain=r,
        retain_gap=gap,
        retain_gap_ci95=gap_ci,
        n_probes=len(audited.probes),
        n_silent=len(subset),
        k=audited.k,
        layers=audited.layers,
        positions=audited.positions,
        audited_model=audited.model,
        original_model=original.model,
        retain_model=retain.model,
        decoder=decoder,
        provenance="[N] eqs. 3-6 of the J-Access paper; [R] k, band, positions and concept filters (Appendix A unavailable)",
        p_above_retain=p_above,
    )


__all__ = [
    "AccessConfig",
    "AccessReadout",
    "BandCandidate",
    "BandSelection",
    "FirstPieceScreen",
    "JAccessResult",
    "Probe",
    "ProbeReadout",
    "answer_probes",
    "band_layers",
    "concept_token_ids",
    "drop_generic",
    "emitted_flags",
    "greedy_continuations",
    "is_silent",
    "j_occ",
    "jocc_ratio",
    "layer_hits",
    "make_probe",
    "mcnemar_greater",
    "paired_cells",
    "piece_token_ids",
    "raw_access",
    "read_access",
    "read_access_many",
    "read_probe",
    "silent_set",
    "token_hit_rates",
]
