"""remnant: tells whether a model's unlearning removed a target or only hid it.

Built on the Yuyari Standard v0.3. The pure core (``stats``, ``standard``, ``statement``, ``records``,
``prereg``, ``config``, ``packs``) imports no torch; model work sits in ``models``, ``train``, ``score``,
``attacks``, ``classd`` and ``latent``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from remnant.errors import (  # a module importing nothing: eager
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
from remnant.lazy import lazy_exports

if TYPE_CHECKING:  # what the type checker sees; at run time each name is imported on first use (_LAZY)
    from remnant.api import evaluate, recompute, run_sweep
    from remnant.assess.finalize import Outcome
    from remnant.assess.run import assess_command as assess
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

#: The public API but the errors: ``name -> submodule`` or ``(submodule, attribute)``, imported on first use so
#: ``import remnant`` stays light (no torch, scipy or transformers; the pure core works without them).
_LAZY: dict[str, str | tuple[str, str]] = {
    "evaluate": "api",
    "assess": ("assess.run", "assess_command"),
    "run_sweep": "api",
    "recompute": "api",
    "verdict": ("standard.verdict", "decide"),
    "Evaluation": "metrics.commands",
    "EvalResult": "metrics.evaluate",
    "Outcome": "assess.finalize",
    "RunSummary": "sweep.driver",
    "VerdictResult": "standard.verdict",
    "VerdictFacts": "standard.facts",
    "PluginWarning": "registry",
}

__getattr__ = lazy_exports(__name__, _LAZY, keep=True)


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
