"""UDS — the Unlearning Depth Score (Lee, Kim, Jo; the UDS paper; docs/latent.md). Non-adjudicating (C-H6).

Stage 1 patches the retain model's block outputs into the full model, layer by layer, on the entity span:
``Δ1_l = s_full − s^ret_l``; the knowledge-encoding (KE) layers are ``{l : Δ1_l > τ}`` (τ = 0.05). Stage 2 does
the same with the audited source: ``Δ2_l = s_full − s^src_l``. Per example
``UDS_i = Σ_{l∈KE} Δ1_l · clip(Δ2_l / Δ1_l, 0, 1) / Σ_{l∈KE} Δ1_l``. As in the reference code, an example with
no KE layer has no score (``UDS_i = None``): it is excluded from the mean, never scored 0, and counted
(``n_no_ke``); so are examples whose entity span is not found (``n_span_not_found``). The model score is the mean
over the scored examples (None when none is scored, where the reference prints 0.0). 1 = erased to the retain
model's level, 0 = intact. Stage 1 does not depend on the audited model, so it is cached by a digest of its inputs
(both models' weight digests, the encoded examples, the layers, the prompt format and the compat flag; τ is
applied afterwards): auditing a new model costs only stage 2.

Variant ``no_retain`` (the UDS paper Limitations; our reconstruction [R]): with no retain model, patch the unlearned
model into the original and report the quantification alone — the mean over layers of ``max(Δ2_l, 0)`` in nats,
not on the 0–1 scale and without KE selection. It is labelled as such wherever it appears.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from remnant.errors import ConfigError
from remnant.latent.cache import DigestCache, digest_inputs, model_digest
from remnant.latent.inputs import Encoded, EncodedExample, EntityExample, PromptStyle, encode_examples

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from remnant.latent.patching import PrefixMemo

TAU = 0.05
STAGE1_KIND = "uds-stage1"


def layer_erasure_ratio(d1: float, d2: float) -> float:
    """LER = clip(Δ2 / Δ1, 0, 1) for a KE layer (Δ1 > τ ≥ 0)."""
    return min(max(d2 / d1, 0.0), 1.0)


def aggregate_example(d1: Sequence[float], d2: Sequence[float], tau: float = TAU) -> float | None:
    """Δ1-weighted mean LER over the KE layers; None when no layer has Δ1 > τ (excluded, §1.4).

    The reference's rule: ``uds = numer / denom if denom > 0 else None`` over the layers with Δ1 > τ; with τ ≥ 0
    (UDSConfig refuses less) a non-empty KE set always has ``denom > 0``.
    """
    ke = [i for i, v in enumerate(d1) if v > tau]
    den = sum(d1[i] for i in ke)
    if not ke or den <= 0.0:
        return None
    return sum(d1[i] * layer_erasure_ratio(d1[i], d2[i]) for i in ke) / den


class UDSExampleResult(BaseModel):
    """One example's layer profile and score."""

    model_config = ConfigDict(extra="forbid")

    idx: str = Field(description="Example id.")
    full_score: float = Field(description="s_full: mean entity log-prob of the unpatched full model.")
    d1: list[float] = Field(description="Δ1 per layer (retain into full); empty for the no_retain variant.")
    d2: list[float] = Field(description="Δ2 per layer (audited source into full).")
    ke_layers: list[int] = Field(description="Knowledge-encoding layers (Δ1 > τ).")
    uds: float | None = Field(description="UDS_i, or None when no KE layer (excluded from the mean).")

    @classmethod
    def profile(
        cls,
        idx: str,
        full_score: float,
        d1: Sequence[float],
        d2: Sequence[float],
        layers: Sequence[int],
        tau: float,
    ) -> UDSExampleResult:
        """One example aggregated as UDS (KE layers: Δ1 > τ), for UDS and its logit-lens baseline alike."""
        ke = [layers[j] for j, v in enumerate(d1) if v > tau]
        return cls(
            idx=idx,
            full_score=full_score,
            d1=list(d1),
            d2=list(d2),
            ke_layers=ke,
            uds=aggregate_example(d1, d2, tau),
        )


class UDSResult(BaseModel):
    """A UDS measurement with everything C-H7(b) asks to report beside it."""

    model_config = ConfigDict(extra="forbid")

    measurement: Literal["uds", "uds_no_retain", "logit_lens_uds"] = Field(
        description="Variant: uds, uds_no_retain ([R], nats) or the logit-lens baseline (§1.9)."
    )
    score: float | None = Field(description="Mean UDS_i over scored examples (None when none scored).")
    n_examples: int = Field(description="Examples given.")
    n_scored: int = Field(description="Examples with at least one KE layer.")
    n_no_ke: int = Field(
        description="Examples excluded from the mean because no layer had Δ1 > τ (the reference's rule)."
    )
    n_span_not_found: int = Field(description="Examples skipped: entity span not found (§1.3).")
    coverage: float = Field(description="n_scored / n_examples.")
    layers: list[int] = Field(description="Patched layers (0-based block indices).")
    tau: float = Field(description="KE threshold τ.")
    prompt_format: str = Field(
        description="raw (reference Question/Answer format, no chat template) or chat."
    )
    uds_compat: bool = Field(
        description="Reference last-layer behaviour (post-norm source state) reproduced."
    )
    n_blocks: int | None = Field(
        default=None, description="Decoder blocks of the target model: whether the last one was patched."
    )
    position: str = Field(description="Patched and scored positions.")
    target_model: str = Field(description="Weights digest of the model patched into (full / original).")
    retain_model: str | None = Field(description="Weights digest of the retain model (None for no_retain).")
    source_model: str = Field(description="Weights digest of the audited source model.")
    stage1_key: str | None = Field(description="Digest keying the cached stage 1 (None for no_retain).")
    layer_mean_ler: list[float | None] = Field(description="Mean LER per layer over examples where KE.")
    examples: list[UDSExampleResult] = Field(description="Per-example profiles.")
    provenance: str = Field(
        description="Method provenance tag ([V] reference algorithm, [R] reconstruction)."
    )


def summary_fields(
    rows: Sequence[UDSExampleResult], n_skipped: int, layers: Sequence[int], tau: float
) -> dict[str, Any]:
    """The score and what every UDS variant reports beside it (C-H7b): an example with no KE layer is counted,
    not averaged; one whose entity span was not found is counted as skipped."""
    scored = [r.uds for r in rows if r.uds is not None]
    n_total = len(rows) + n_skipped
    return {
        "layers": list(layers),
        "tau": tau,
        "position": POSITION,
        "score": sum(scored) / len(scored) if scored else None,
        "n_examples": n_total,
        "n_scored": len(scored),
        "n_no_ke": len(rows) - len(scored),
        "n_span_not_found": n_skipped,
        "coverage": len(scored) / n_total if n_total else 0.0,
    }


POSITION = (
    "entity span [eval_start, eval_end): last token before the entity and all entity tokens but the last"
)


@dataclass(frozen=True)
class UDSConfig:
    """UDS settings (defaults: the reference's)."""

    tau: float = TAU
    layers: tuple[int, ...] | None = None
    prompt_format: PromptStyle = "raw"
    uds_compat: bool = False
    fast: bool = True
    #: chat format only: the system turn the states were trained with (None: the template's default turn)
    system_prompt: str | None = None

    def __post_init__(self) -> None:
        # τ < 0 would admit layers with Δ1 ≤ 0 into KE: a zero or negative LER denominator (the reference divides
        # by it); the paper's sensitivity grid is τ ∈ [0, 0.1].
        if not self.tau >= 0.0:
            raise ConfigError(
                f"uds: tau must be a number >= 0 (a KE layer has Δ1 > tau), not {self.tau}",
                requirement="C-H7",
            )
        if self.prompt_format not in ("raw", "chat"):
            raise ConfigError(
                f"uds: prompt_format must be 'raw' (the reference's) or 'chat', not {self.prompt_format!r}",
                requirement="C-H7",
            )

    def resolve_layers(self, model: PreTrainedModel) -> list[int]:
        n = n_blocks(model)
        return list(self.layers) if self.layers is not None else list(range(n))


def n_blocks(model: PreTrainedModel) -> int:
    """The number of decoder blocks of ``model``."""
    from remnant.models.arch import resolve_parts

    return len(resolve_parts(model).blocks)


@dataclass(frozen=True)
class Stage1:
    """Stage-1 results (retain into full), reusable for every audited model on the same inputs."""

    key: str
    full_digest: str
    retain_digest: str
    layers: tuple[int, ...]
    encoded: Encoded
    full_scores: tuple[float, ...]
    d1: tuple[tuple[float, ...], ...]
    #: the full model's prefix keys and values, kept in memory for stage 2 of each source scored against this
    #: stage 1 (a pool's models share them); never serialised
    prefixes: PrefixMemo = field(default_factory=lambda: _prefix_memo(), compare=False, repr=False)

    def to_json(self) -> dict[str, object]:
        return {
            "key": self.key,
            "full_digest": self.full_digest,
            "retain_digest": self.retain_digest,
            "layers": list(self.layers),
            "full_scores": list(self.full_scores),
            "d1": [list(r) for r in self.d1],
            "examples": [e.idx for e in self.encoded.examples],
        }


def _prefix_memo() -> PrefixMemo:
    from remnant.latent.patching import PrefixMemo

    return PrefixMemo()


def _patched(
    target: PreTrainedModel,
    examples: Sequence[EncodedExample],
    source: PreTrainedModel,
    layers: Sequence[int],
    cfg: UDSConfig,
    prefixes: PrefixMemo | None = None,
    *,
    clean: bool = True,
) -> Iterator[tuple[float | None, list[float]]]:
    """Per example: ``s_full`` (None when ``clean`` is off: stage 2 has it from stage 1) and ``source`` patched
    in at each layer. The source's states are read a few examples per forward, and the fast path patches those
    examples' windows in packs (:func:`~remnant.latent.patching.window_packs`)."""
    from remnant.latent.patching import fast_scores_many, naive_scores, source_states_many, window_packs

    step = 8
    for start in range(0, len(examples), step):
        group = examples[start : start + step]
        states = source_states_many(source, group, layers, uds_compat=cfg.uds_compat, batch_size=step)
        if not cfg.fast:
            for ex, state in zip(group, states, strict=True):
                full_score, (naive_row,) = naive_scores(target, ex, [state], layers)
                yield full_score, naive_row
            continue
        for pack in window_packs(target, group, rows=len(set(layers)) + int(clean)):
            scored = fast_scores_many(
                target, [group[i] for i in pack], [[states[i]] for i in pack], layers, prefixes, clean=clean
            )
            for s_full, (row,) in scored:
                yield s_full, row


def _stage1_key(full_d: str, retain_d: str, encoded: Encoded, layers: Sequence[int], cfg: UDSConfig) -> str:
    return digest_inputs(
        {
            "kind": STAGE1_KIND,
            "full": full_d,
            "retain": retain_d,
            "examples": [e.to_dict() for e in encoded.examples],
            "layers": list(layers),
            "prompt_format": encoded.style,
            "uds_compat": cfg.uds_compat,
            "metric": "mean_entity_logprob",
            "patch_scope": "span",
        }
    )


def stage1(
    full: PreTrainedModel,
    retain: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    examples: Sequence[EntityExample],
    cfg: UDSConfig | None = None,
    *,
    cache_dir: Path | str | None = None,
    full_digest: str | None = None,
    retain_digest: str | None = None,
) -> Stage1:
    """Stage 1, read from the digest cache when present (τ is applied later, so it is not in the key)."""
    cfg = cfg or UDSConfig()
    encoded = encode_examples(tokenizer, examples, cfg.prompt_format, cfg.system_prompt)
    layers = cfg.resolve_layers(full)
    full_d, retain_d = model_digest(full, full_digest), model_digest(retain, retain_digest)
    key = _stage1_key(full_d, retain_d, encoded, layers, cfg)
    cache = DigestCache(cache_dir) if cache_dir is not None else None
    hit = cache.get_json(STAGE1_KIND, key) if cache is not None else None
    prefixes = _prefix_memo()
    if hit is not None:
        full_scores = tuple(float(v) for v in hit["full_scores"])
        d1 = tuple(tuple(float(v) for v in r) for r in hit["d1"])
    else:
        fs, rows = [], []
        for s_full, patched in _patched(full, encoded.examples, retain, layers, cfg, prefixes):
            assert s_full is not None  # the clean row is kept unless clean=False
            fs.append(s_full)
            rows.append(tuple(s_full - s for s in patched))
        full_scores, d1 = tuple(fs), tuple(rows)
    result = Stage1(key, full_d, retain_d, tuple(layers), encoded, full_scores, d1, prefixes)
    if cache is not None and hit is None:
        cache.put_json(STAGE1_KIND, key, result.to_json())
    return result


def _layer_means(rows: list[UDSExampleResult], layers: Sequence[int], tau: float) -> list[float | None]:
    out: list[float | None] = []
    for j in range(len(layers)):
        vals = [layer_erasure_ratio(r.d1[j], r.d2[j]) for r in rows if r.d1 and r.d1[j] > tau]
        out.append(sum(vals) / len(vals) if vals else None)
    return out


def score_source(
    full: PreTrainedModel,
    source: PreTrainedModel,
    s1: Stage1,
    cfg: UDSConfig | None = None,
    *,
    source_digest: str | None = None,
) -> UDSResult:
    """Stage 2 for ``source`` against a stage 1 (fresh or cached) and the aggregated UDS."""
    cfg = cfg or UDSConfig()
    layers = list(s1.layers)
    rows: list[UDSExampleResult] = []
    scored = _patched(full, s1.encoded.examples, source, layers, cfg, s1.prefixes, clean=False)
    for ex, s_full, d1, (_, patched) in zip(s1.encoded.examples, s1.full_scores, s1.d1, scored, strict=True):
        d2 = [s_full - s for s in patched]
        rows.append(UDSExampleResult.profile(ex.idx, s_full, d1, d2, layers, cfg.tau))
    return UDSResult(
        measurement="uds",
        **summary_fields(rows, len(s1.encoded.skipped), layers, cfg.tau),
        prompt_format=s1.encoded.style,
        uds_compat=cfg.uds_compat,
        n_blocks=n_blocks(full),
        target_model=s1.full_digest,
        retain_model=s1.retain_digest,
        source_model=model_digest(source, source_digest),
        stage1_key=s1.key,
        layer_mean_ler=_layer_means(rows, layers, cfg.tau),
        examples=rows,
        provenance="[V] UDS two-stage patching (docs/latent.md); block outputs from hooks"
        + (" with the reference's last-layer compat" if cfg.uds_compat else ""),
    )


def uds(
    full: PreTrainedModel,
    retain: PreTrainedModel,
    source: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    examples: Sequence[EntityExample],
    cfg: UDSConfig | None = None,
    *,
    cache_dir: Path | str | None = None,
) -> UDSResult:
    """Both stages; stage 1 comes from ``cache_dir`` when it holds the same inputs."""
    s1 = stage1(full, retain, tokenizer, examples, cfg, cache_dir=cache_dir)
    return score_source(full, source, s1, cfg)


def uds_no_retain(
    original: PreTrainedModel,
    unlearned: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    examples: Sequence[EntityExample],
    cfg: UDSConfig | None = None,
) -> UDSResult:
    """[R] No-retain variant: patch ``unlearned`` into ``original``; score = mean over layers of max(Δ2, 0) (nats)."""
    cfg = cfg or UDSConfig()
    encoded = encode_examples(tokenizer, examples, cfg.prompt_format, cfg.system_prompt)
    layers = cfg.resolve_layers(original)
    rows: list[UDSExampleResult] = []
    for ex, (s_full, patched) in zip(
        encoded.examples, _patched(original, encoded.examples, unlearned, layers, cfg), strict=True
    ):
        assert s_full is not None  # the clean row is kept unless clean=False
        d2 = [s_full - s for s in patched]
        value = sum(max(v, 0.0) for v in d2) / len(d2)
        rows.append(UDSExampleResult(idx=ex.idx, full_score=s_full, d1=[], d2=d2, ke_layers=[], uds=value))
    return UDSResult(
        measurement="uds_no_retain",
        **summary_fields(rows, len(encoded.skipped), layers, cfg.tau),
        prompt_format=encoded.style,
        uds_compat=cfg.uds_compat,
        n_blocks=n_blocks(original),
        target_model=model_digest(original),
        retain_model=None,
        source_model=model_digest(unlearned),
        stage1_key=None,
        layer_mean_ler=[None] * len(layers),
        examples=rows,
        provenance="[R] no-retain quantification (the UDS paper Limitations): mean max(Δ2,0) over layers, in nats; "
        "not on the UDS 0-1 scale",
    )


__all__ = [
    "TAU",
    "Stage1",
    "UDSConfig",
    "UDSExampleResult",
    "UDSResult",
    "aggregate_example",
    "layer_erasure_ratio",
    "n_blocks",
    "score_source",
    "stage1",
    "summary_fields",
    "uds",
    "uds_no_retain",
]
