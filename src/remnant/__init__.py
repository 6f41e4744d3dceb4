"""remnant: tells whether a model's unlearning removed a target or only hid it.

Built on the Yuyari Standard v0.3. The pure core (``stats``, ``standard``, ``statement``, ``records``,
``prereg``, ``config``, ``packs``) imports no torch; model work sits in ``models``, ``train``, ``score``,
``attacks``, ``classd`` and ``latent``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what the type checker sees; at run time each name is imported on first use (_LAZY)
    from remnant.api import evaluate, recompute, run_sweep
    from remnant.assess.finalize import Outcome
    from remnant.assess.run import assess_command as assess
    from remnant.errors import (
        ConfigError,
        DivergedError,
        IntegrityError,
        ModelError,
        PackError,
        PreregError,
        RecordError,
        RemnantError,
        SignatureError,
        UnsupportedArchitecture,
    )
    from remnant.metrics.commands import Evaluation
    from remnant.metrics.evaluate import EvalResult
    from remnant.registry import PluginWarning
    from remnant.standard.facts import VerdictFacts
    from remnant.standard.verdict import VerdictResult
    from remnant.standard.verdict import decide as verdict
    from remnant.sweep.driver import RunSummary

__version__ = "0.1.0"

#: The three versions an assessment records together (Z1).
STANDARD_VERSION = "0.3"
HARNESS_VERSION = __version__

#: The public API: ``name -> (module, attribute)``, imported on first use so ``import remnant`` stays light (no
#: torch, scipy or transformers; the pure core works without them).
_LAZY: dict[str, tuple[str, str]] = {
    "evaluate": ("remnant.api", "evaluate"),
    "assess": ("remnant.assess.run", "assess_command"),
    "run_sweep": ("remnant.api", "run_sweep"),
    "recompute": ("remnant.api", "recompute"),
    "verdict": ("remnant.standard.verdict", "decide"),
    "Evaluation": ("remnant.metrics.commands", "Evaluation"),
    "EvalResult": ("remnant.metrics.evaluate", "EvalResult"),
    "Outcome": ("remnant.assess.finalize", "Outcome"),
    "RunSummary": ("remnant.sweep.driver", "RunSummary"),
    "VerdictResult": ("remnant.standard.verdict", "VerdictResult"),
    "VerdictFacts": ("remnant.standard.facts", "VerdictFacts"),
    "RemnantError": ("remnant.errors", "RemnantError"),
    "ConfigError": ("remnant.errors", "ConfigError"),
    "PreregError": ("remnant.errors", "PreregError"),
    "PackError": ("remnant.errors", "PackError"),
    "ModelError": ("remnant.errors", "ModelError"),
    "UnsupportedArchitecture": ("remnant.errors", "UnsupportedArchitecture"),
    "RecordError": ("remnant.errors", "RecordError"),
    "IntegrityError": ("remnant.errors", "IntegrityError"),
    "SignatureError": ("remnant.errors", "SignatureError"),
    "DivergedError": ("remnant.errors", "DivergedError"),
    "PluginWarning": ("remnant.registry", "PluginWarning"),
}


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'remnant' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(target[0]), target[1])
    globals()[name] = value  # resolved once
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


__all__ = [
    "ConfigError",
    "DivergedError",
    "EvalResult",
    "Evaluation",
    "HARNESS_VERSION",
    "IntegrityError",
    "ModelError",
    "Outcome",
    "PackError",
    "PluginWarning",
    "PreregError",
    "RecordError",
    "RemnantError",
    "RunSummary",
    "STANDARD_VERSION",
    "SignatureError",
    "UnsupportedArchitecture",
    "VerdictFacts",
    "VerdictResult",
    "__version__",
    "assess",
    "evaluate",
    "recompute",
    "run_sweep",
    "verdict",
]
