"""Small synthetic pools in the sweep/study table layout, with structure planted so a test knows the answer.

Metrics of :func:`planted_pool` (all ``higher`` = more knowledge unless named otherwise):

* ``separating``: target models read 0.8–1.0, never-saw and unlearned 0.0–0.3; NF4 leaves every value as it is,
  relearning shifts every model (never-saw included) by the same +0.1: AUC 1, Q = R = 1;
* ``uds``: 1 − separating (UDS orientation: higher = more erased), so the same AUC, Q and R after 1 − x;
* ``random``: independent uniform draws for every model: AUC near 0.5;
* ``quant_unstable``: separating, but NF4 lifts every unlearned model by +0.6 (quantization recovers it): low Q;
* ``relearn_unstable``: separating, but relearning lifts unlearned models by +0.7 while never-saw models move
  +0.05: low R;
* ``planted_pred``: the recovery predictor: its unperturbed value equals the unlearned model's planted recovery
  except for two adjacent swaps in rank, so Spearman ρ with recovery is 1 − 6·4 / (n(n² − 1));
* ``steps_to_recover`` (with ``steps=True``): 100 · (1 − planted_pred), falling as the predictor rises (ρ = −1),
  missing (never recovered: censored) for the model with the lowest predictor.

Items (``n_unlearned + 1`` of them): the outcome ``kappa`` per item is 1 on the target model, 0 before the attack
on unlearned and never-saw models; after relearning, unlearned model k (0-based) has its first k + 1 items at 1
(planted revival rate (k + 1)/n_items, also its model-level ``kappa``) and every never-saw model its first item;
``planted_pred`` per item is high exactly on the items that revive (item-level AUROC 1) and ``random`` per item is
noise.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np

from remnant.results import FIXED_COLUMNS, ITEM_COLUMNS, write_csv_table

#: The planted metrics are declared like any unknown metric: in the study config (pre-registered).
PLANTED_ORIENTATION: dict[str, Literal["higher"]] = {
    "separating": "higher",
    "random": "higher",
    "quant_unstable": "higher",
    "relearn_unstable": "higher",
    "planted_pred": "higher",
}
METRICS = ("separating", "uds", "random", "quant_unstable", "relearn_unstable", "planted_pred", "kappa")


def spearman_with_two_swaps(n: int) -> float:
    """ρ of 0..n−1 against itself with (0, 1) and (2, 3) swapped: Σd² = 4."""
    return 1.0 - 6.0 * 4.0 / (n * (n * n - 1))


def _row(
    model: str, pool: str, perturbation: str, values: Mapping[str, float | None], **extra: Any
) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(FIXED_COLUMNS)
    row.update(model=model, pool=pool, perturbation=perturbation, status="ok", hyperparameters="{}")
    row.update(extra)
    row.update(values)
    return row


def planted_pool(
    folder: Path,
    *,
    n_target: int = 8,
    n_never: int = 8,
    n_unlearned: int = 20,
    low_utility: int = 2,
    seed: int = 0,
    steps: bool = False,
) -> dict[str, Any]:
    """Write results.csv and items.csv into ``folder``; return what was planted."""
    rng = np.random.default_rng(seed)
    n_items = n_unlearned + 1
    rows: list[dict[str, Any]] = []
    items: list[dict[str, Any]] = []
    targets = [f"full-{i}" for i in range(n_target)]
    for i, model in enumerate(targets):
        sep = 0.8 + 0.2 * (i + 0.5) / n_target
        base = {"separating": sep, "uds": 1 - sep, "random": rng.uniform(), "quant_unstable": sep}
        base |= {"relearn_unstable": sep, "planted_pred": 1.0, "kappa": 1.0}
        for pert in ("none", "nf4", "relearn"):
            rows.append(_row(model, "target", pert, base, utility=1.0))
        items += [_item(model, "none", "kappa", j, 1.0) for j in range(n_items)]
    for i in range(n_never):
        model = f"retain-{i}"
        sep = 0.3 * (i + 0.5) / n_never
        base = {"separating": sep, "uds": 1 - sep, "random": rng.uniform(), "quant_unstable": sep}
        base |= {"relearn_unstable": sep, "planted_pred": 0.0, "kappa": 0.0}
        rows.append(_row(model, "never_saw", "none", base, utility=1.0))
        rows.append(_row(model, "never_saw", "nf4", base, utility=1.0))
        shifted = {k: v + 0.1 for k, v in base.items()} | {"uds": base["uds"] - 0.1}
        shifted["relearn_unstable"] = base["relearn_unstable"] + 0.05
        shifted["random"] = rng.uniform()
        shifted["kappa"] = 1.0 / n_items  # the gold model revives one item
        rows.append(_row(model, "never_saw", "relearn", shifted, utility=1.0))
        items += [_item(model, "none", "kappa", j, 0.0) for j in range(n_items)]
        items += [_item(model, "relearn", "kappa", j, 1.0 if j == 0 else 0.0) for j in range(n_items)]
    order = list(range(n_unlearned))
    order[0], order[1], order[2], order[3] = order[1], order[0], order[3], order[2]
    rates = [(k + 1) / n_items for k in range(n_unlearned)]
    for k in range(n_unlearned):
        model = f"npo-{k}" if k % 2 == 0 else f"gd-{k}"
        method = "npo" if k % 2 == 0 else "grad_diff"
        sep = 0.3 * rng.uniform()
        utility = 0.5 if k < low_utility else 0.95
        pred = rates[order[k]]
        base = {"separating": sep, "uds": 1 - sep, "random": rng.uniform(), "quant_unstable": sep}
        base |= {"relearn_unstable": sep, "planted_pred": pred, "kappa": 0.0}
        extra = {"method": method, "seed": k, "parent": targets[k % n_target], "utility": utility}
        rows.append(_row(model, "unlearned", "none", base, **extra))
        quant = base | {"random": rng.uniform(), "quant_unstable": sep + 0.6}
        rows.append(_row(model, "unlearned", "nf4", quant, **extra))
        relearned: dict[str, float | None] = {key: v + 0.1 for key, v in base.items()}
        relearned["uds"] = base["uds"] - 0.1
        relearned |= {"random": rng.uniform(), "relearn_unstable": sep + 0.7, "kappa": rates[k]}
        if steps:  # fewer steps the more the predictor reads; the model with the lowest reads never recovers
            relearned["steps_to_recover"] = None if order[k] == 0 else 100.0 * (1.0 - pred)
        rows.append(_row(model, "unlearned", "relearn", relearned, **extra))
        revived = k + 1
        items += [_item(model, "none", "kappa", j, 0.0) for j in range(n_items)]
        items += [_item(model, "relearn", "kappa", j, 1.0 if j < revived else 0.0) for j in range(n_items)]
        items += [
            _item(model, "none", "planted_pred", j, 1.0 if j < revived else 0.0) for j in range(n_items)
        ]
        items += [_item(model, "none", "random", j, float(rng.uniform())) for j in range(n_items)]
    columns = [*FIXED_COLUMNS, *METRICS, *(("steps_to_recover",) if steps else ())]
    write_csv_table(folder / "results.csv", rows, columns)
    write_csv_table(folder / "items.csv", items, ITEM_COLUMNS)
    return {
        "rates": rates,
        "order": order,
        "n_items": n_items,
        "gold": 1.0 / n_items,
        "low_utility": low_utility,
    }


def _item(model: str, perturbation: str, metric: str, j: int, value: float) -> dict[str, Any]:
    return {
        "model": model,
        "perturbation": perturbation,
        "metric": metric,
        "item_id": f"q{j:02d}",
        "value": value,
    }
