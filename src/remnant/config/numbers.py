"""Every number in a config checked where it sits, free-form parameter tables included (R14, R23).

The typed fields carry their own bounds (:mod:`remnant.config.fields`), but ``[attacks.<name>.params]``,
``attacks.relearning.params``, ``models.post_removal.params`` and ``utility.params.<metric>`` are open tables
handed to components. Pre-registration freezes them as written (R14) and the run manifest repeats them (R23), so
a value no run can honour must be refused when the config is read, not deep inside a run:

- every float is finite (TOML allows ``nan``, ``inf`` and ``-inf``; no rate, budget or step size is either);
- every integer lies in ±:data:`~remnant.config.fields.MAX_INT`, except a seed (a key ``seed``, ``*_seed``, or
  any key of ``[seeds]``), which lies in [0, :data:`~remnant.config.fields.MAX_SEED`];
- no value is a TOML date or time (no field takes one, and JSON cannot carry it into prereg.json);
- a parameter whose meaning is known (:data:`PARAM_BOUNDS`, :data:`PATTERN_PARAMS`) has that meaning's type and
  range in whichever component's table it appears: a name listed there means the same in every registered
  component, a new one that takes it included.

The component itself still has the last word when it is created up front (``remnant preregister`` and
``remnant assess`` both create every declared component before any model work: :mod:`remnant.assess.inputs`).
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from typing import Any

from remnant.config.fields import (
    MAX_BATCH,
    MAX_EPOCHS,
    MAX_INT,
    MAX_LR,
    MAX_SEED,
    MAX_TOKENS,
    patterns_problem,
)

Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class Bound:
    """A parameter's meaning as a type and a range: ``lo`` (excluded when ``lo_open``) to ``hi`` inclusive."""

    kind: type
    lo: float
    hi: float
    lo_open: bool = False
    meaning: str = ""

    def problem(self, value: Any) -> str | None:
        """Why ``value`` does not fit, or None."""
        if self.kind is int and (isinstance(value, bool) or not isinstance(value, int)):
            return f"must be an integer ({self.meaning})"
        if self.kind is float and (isinstance(value, bool) or not isinstance(value, int | float)):
            return f"must be a number ({self.meaning})"
        low_ok = value > self.lo if self.lo_open else value >= self.lo
        if not (low_ok and value <= self.hi):
            bracket = "(" if self.lo_open else "["
            return f"is {value}, outside {bracket}{self.lo:g}, {self.hi:g}] ({self.meaning})"
        return None


_TRAIN_STEPS = 100_000
#: Parameters of known meaning, by name, wherever a free-form parameter table holds them (module docstring).
PARAM_BOUNDS: dict[str, Bound] = {
    "lr": Bound(float, 0, MAX_LR, True, "a learning rate"),
    "epochs": Bound(float, 0, MAX_EPOCHS, True, "an epoch count"),
    "finetune_epochs": Bound(float, 0, MAX_EPOCHS, True, "an epoch count"),
    "warmup_epochs": Bound(float, 0, MAX_EPOCHS, False, "an epoch count"),
    "batch_size": Bound(int, 1, MAX_BATCH, False, "examples per step"),
    "grad_accum": Bound(int, 1, MAX_BATCH, False, "steps per optimiser update"),
    "weight_decay": Bound(float, 0, 10, False, "a weight decay"),
    "max_grad_norm": Bound(float, 0, 1e6, True, "a gradient-norm clip"),
    "divergence_factor": Bound(float, 1, 1e6, True, "a loss ratio"),
    "lora_rank": Bound(int, 1, MAX_BATCH, False, "a LoRA rank"),
    "lora_alpha": Bound(float, 0, 1e6, True, "a LoRA scale"),
    "max_new_tokens": Bound(int, 1, MAX_TOKENS, False, "a generation length"),
    "max_length": Bound(int, 1, 16 * MAX_TOKENS, False, "a sequence length"),
    "shots": Bound(int, 0, 1_024, False, "a number of demonstrations"),
    "n_samples": Bound(int, 1, 100_000, False, "samples per item"),
    "temperature": Bound(float, 0, 100, True, "a sampling temperature"),
    "top_k": Bound(int, 1, 10**6, False, "a vocabulary cut-off"),
    "steps": Bound(int, 0, _TRAIN_STEPS, False, "optimisation steps"),
    "n_perturbations": Bound(int, 1, _TRAIN_STEPS, False, "perturbations per item"),
    "search_width": Bound(int, 1, _TRAIN_STEPS, False, "candidates per step"),
    "topk": Bound(int, 1, 10**6, False, "candidate tokens per position"),
    "n_replace": Bound(int, 1, 1_024, False, "tokens replaced per candidate"),
    "suffix_len": Bound(int, 1, 1_024, False, "a suffix length in tokens"),
    "n_tokens": Bound(int, 1, 1_024, False, "a soft-prompt length in tokens"),
    "n_alternates": Bound(int, 1, 1_024, False, "alternate answers per item"),
    "blocksize": Bound(int, 1, 10**6, False, "a quantisation block"),
    "group_size": Bound(int, 1, 10**6, False, "a quantisation group"),
    "layer_fraction": Bound(float, 0, 1, False, "a fraction of the depth"),
    "noise_scale": Bound(float, 0, 1e6, False, "a noise scale"),
    "step_size": Bound(float, 0, 1e6, True, "a step size"),
    "radius": Bound(float, 0, 1e6, True, "a perturbation radius"),
}
#: Parameters of known meaning that are not numbers: a ``trainable`` selection of parameter-name regexes, each of
#: which must compile (training would otherwise fail on it after the installation and removal ran).
PATTERN_PARAMS = frozenset({"trainable"})


def param_problem(key: str, value: object) -> str | None:
    """Why ``value`` does not fit the known meaning of the parameter ``key`` (:data:`PARAM_BOUNDS`,
    :data:`PATTERN_PARAMS`), or None (also for a parameter of no known meaning)."""
    if key in PATTERN_PARAMS:
        # a value of the wrong type is the component's to refuse (its constructor types, C-W1); only patterns
        # that do not compile are refused here
        is_list = isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)
        return patterns_problem(value) if is_list else None
    bound = PARAM_BOUNDS.get(key)
    return bound.problem(value) if bound is not None else None


def _is_seed(loc: Loc) -> bool:
    key = loc[-1] if loc and isinstance(loc[-1], str) else ""
    return key == "seed" or key.endswith("_seed") or (len(loc) >= 2 and loc[0] == "seeds")


def _value_problem(value: object, loc: Loc) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return f"is {value}: every number must be finite"
    if isinstance(value, int):
        if _is_seed(loc):
            if not 0 <= value <= MAX_SEED:
                return f"is {value}, outside the seed range [0, 2**53 - 1]"
        elif abs(value) > MAX_INT:
            return f"is {value}, beyond ±10**9: no count, size or step number in a config is that large"
    if isinstance(value, dt.date | dt.time):
        return "is a TOML date or time; no field takes one"
    return None


def _walk(value: object, loc: Loc) -> tuple[Loc, str] | None:
    """The first number out of range anywhere under ``value`` (depth-first, file order)."""
    stack: list[tuple[object, Loc]] = [(value, loc)]
    while stack:
        node, here = stack.pop()
        if isinstance(node, dict):
            stack += [(node[k], (*here, k)) for k in reversed(list(node))]
        elif isinstance(node, list):
            stack += [(node[i], (*here, i)) for i in reversed(range(len(node)))]
        else:
            problem = _value_problem(node, here)
            if problem is not None:
                return here, problem
    return None


def _param_tables(raw: dict[str, Any]) -> list[tuple[Loc, dict[str, Any]]]:
    """The free-form parameter tables of a raw config, each with its location (malformed parts skipped)."""
    out: list[tuple[Loc, dict[str, Any]]] = []

    def table(node: object, *path: str) -> None:
        for part in path:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            out.append((path, node))

    attacks = raw.get("attacks")
    if isinstance(attacks, dict):
        for name in attacks:
            table(raw, "attacks", name, "params")
    table(raw, "models", "post_removal", "params")
    utility_params = raw.get("utility", {}).get("params") if isinstance(raw.get("utility"), dict) else None
    if isinstance(utility_params, dict):
        for metric in utility_params:
            table(raw, "utility", "params", metric)
    return out


def number_problem(raw: dict[str, Any]) -> tuple[Loc, str] | None:
    """The location and problem of the first number in ``raw`` (a parsed config) that breaks the module's rules."""
    found = _walk(raw, ())
    if found is not None:
        return found
    for loc, params in _param_tables(raw):
        for key, value in params.items():
            problem = param_problem(key, value)
            if problem is not None:
                return (*loc, key), problem
    return None


__all__ = ["PARAM_BOUNDS", "PATTERN_PARAMS", "Bound", "number_problem", "param_problem"]
