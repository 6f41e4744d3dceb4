"""The papers' published figures, printed beside ours in every study report (numbers only; no code was copied).

* UDS meta-evaluation (the UDS paper §4; values from ``gnueaj/unlearning-depth-score`` ``docs/data/meta_eval.json``
  at fc31639, [V]): AUC over 30 P vs 30 N models, Q and R over the utility- and faithfulness-filtered subsets of
  150 unlearned Llama-3.2-1B TOFU forget10 models, HM = HM(Q, R), overall = HM(AUC, HM). Their metric keys are
  mapped to ours where the definitions correspond; their truth ratio is p_c/(p_c + p_w) (higher = more
  knowledge), ours is OpenUnlearning's ``closer_to_1_better`` aggregate, so that row compares a cousin.
* J-Access recovery prediction (the J-Access paper Table 2 text, Table 3, Test 3): model-level Spearman ρ with excess
  revival and with steps to recover, partial, within-method pooled; item-level AUROC; the WD-Train Goodhart arm.
* Annex B.6 of the Standard: the direction probe's readmission study (demote).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PublishedMetaEval:
    """One metric's row of the UDS paper's meta-evaluation."""

    label: str
    auc: float
    q: float | None
    r: float | None
    hm: float | None

    @property
    def overall(self) -> float | None:
        if self.hm is None:
            return None
        return 2 * self.auc * self.hm / (self.auc + self.hm) if self.auc + self.hm else 0.0


#: Our metric name -> the UDS paper's row (meta_eval.json: faithfulness.auc_roc, robustness.{quantization,
#: relearning, agg}). Rows without a counterpart here (jailbreak ROUGE, normalised MIAs, CKA, Fisher) are in
#: :data:`UDS_PAPER_OTHER`.
UDS_PAPER: dict[str, PublishedMetaEval] = {
    "extraction_strength": PublishedMetaEval("Extraction Strength", 0.891, 0.9700, 0.7703, 0.8587),
    "exact_memorization": PublishedMetaEval("Exact Memorization", 0.817, 0.9843, 0.6051, 0.7495),
    "forget_Q_A_Prob": PublishedMetaEval("Probability", 0.816, 0.9238, 0.6417, 0.7573),
    "forget_Q_A_PARA_Prob": PublishedMetaEval("Para. Probability", 0.707, 0.8529, 0.8988, 0.8752),
    "forget_truth_ratio": PublishedMetaEval("Truth Ratio (p_c/(p_c+p_w))", 0.947, 0.9960, 0.2343, 0.3794),
    "forget_Q_A_ROUGE": PublishedMetaEval("ROUGE", 0.722, 0.9342, 0.2025, 0.3329),
    "forget_Q_A_PARA_ROUGE": PublishedMetaEval("Para. ROUGE", 0.832, 0.9507, 0.0637, 0.1194),
    "mia_loss": PublishedMetaEval("MIA-LOSS", 0.902, 0.9348, 0.5192, 0.6676),
    "mia_zlib": PublishedMetaEval("MIA-ZLib", 0.867, 0.9382, 0.4874, 0.6415),
    "mia_min_k": PublishedMetaEval("MIA-Min-K", 0.907, 0.9231, 0.5322, 0.6752),
    "mia_min_k_plus_plus": PublishedMetaEval("MIA-Min-K++", 0.816, 0.8826, 0.4308, 0.5790),
    "logit_lens_uds": PublishedMetaEval("Logit Lens (fixed full decoder)", 0.927, 0.9587, 0.8116, 0.8791),
    "uds": PublishedMetaEval("UDS", 0.971, 0.9677, 0.8997, 0.9325),
}

UDS_PAPER_OTHER: dict[str, PublishedMetaEval] = {
    "jailbreak_rouge": PublishedMetaEval("Jailbreak ROUGE", 0.757, 0.9713, 0.1831, 0.3081),
    "s_mia_loss": PublishedMetaEval("s_LOSS", 0.891, 0.7194, 0.6635, 0.6903),
    "s_mia_zlib": PublishedMetaEval("s_ZLib", 0.870, 0.7036, 0.7450, 0.7237),
    "s_mia_min_k": PublishedMetaEval("s_Min-K", 0.891, 0.7104, 0.6974, 0.7038),
    "s_mia_min_kpp": PublishedMetaEval("s_Min-K++", 0.799, 0.6427, 0.5655, 0.6016),
    "cka": PublishedMetaEval("CKA", 0.648, 0.9968, 0.0134, 0.0264),
    "fisher_masked_0.001": PublishedMetaEval("Fisher Masked (0.1%)", 0.712, 0.5825, 0.9460, 0.7210),
}

UDS_PAPER_SOURCE = (
    "Lee, Kim, Jo, arXiv 2605.24614 §4 (the UDS paper); gnueaj/unlearning-depth-score docs/data/meta_eval.json "
    "(fc31639): 30 P vs 30 N models; 150 unlearned Llama-3.2-1B-Instruct TOFU forget10 models, 8 methods"
)


@dataclass(frozen=True)
class PublishedCorrelation:
    """One J-Access figure from the J-Access paper (model-level ρ or item-level AUROC)."""

    analysis: str
    value: float


#: the J-Access paper Table 2 / Test 2 text (identity-level J-Access, 398 OpenUnlearning models, the attacked subset).
JACCESS_RECOVERY: tuple[PublishedCorrelation, ...] = (
    PublishedCorrelation("pooled ρ with excess revival", 0.35),
    PublishedCorrelation("pooled ρ with steps to recover", -0.70),
    PublishedCorrelation("partial ρ (FQ, MU) with excess revival", 0.33),
    PublishedCorrelation("within-method pooled ρ (Fisher z)", 0.45),
    PublishedCorrelation("within-method pooled ρ, knowledge level", 0.71),
    PublishedCorrelation("ρ of J-Access with UDS", -0.72),
)

#: the J-Access paper Table 3: median per-checkpoint item-level AUROC of which facts revive.
JACCESS_ITEM_AUROC: tuple[PublishedCorrelation, ...] = (
    PublishedCorrelation("pre-attack probability", 0.582),
    PublishedCorrelation("MIA (best of six)", 0.579),
    PublishedCorrelation("J-Access (knowledge level)", 0.555),
    PublishedCorrelation("logit-lens accessibility", 0.548),
    PublishedCorrelation("J-Access (preregistered)", 0.504),
)

#: the J-Access paper, Test 3 (WD-Train): λ = 0 → 10 lowers J-Access 0.67 → 0.55 and raises post-attack revival 0.283 → 0.387.
JACCESS_GOODHART = {"lambda": (0.0, 10.0), "j_access": (0.67, 0.55), "revival": (0.283, 0.387)}

#: The Standard's Annex B.6 (the direction probe, 780 runs, δ = 0.10, ≥ 80 % of evaluable cells per method): per
#: method (evaluable cells, content null held, procedure null held); ρ of survival with relearning recovery at the
#: primary configuration; the pre-registered decision.
ANNEX_B6_METHODS: dict[str, tuple[int, int | None, int | None]] = {
    "npo": (10, 0, 0),
    "task_vector": (8, 0, 0),
    "rmu": (0, None, None),
}
ANNEX_B6_RHO = -0.49
ANNEX_B6_DECISION = "demote"

__all__ = [
    "ANNEX_B6_DECISION",
    "ANNEX_B6_METHODS",
    "ANNEX_B6_RHO",
    "JACCESS_GOODHART",
    "JACCESS_ITEM_AUROC",
    "JACCESS_RECOVERY",
    "UDS_PAPER",
    "UDS_PAPER_OTHER",
    "UDS_PAPER_SOURCE",
    "PublishedCorrelation",
    "PublishedMetaEval",
]
