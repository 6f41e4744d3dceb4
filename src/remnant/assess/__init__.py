"""The assessment: plan (cost before running), run (orchestrator, resumable) and the run manifest (R23-R25).

This package shares its name with the public function ``remnant.assess``
(:func:`remnant.assess.run.assess_command`). Importing a subpackage sets it as an attribute of its parent, so once
anything has imported ``remnant.assess.*`` (the function's own first call does), ``remnant.assess`` is this package
and no longer the function. The package is therefore callable, and calling it runs the function:
``remnant.assess(config, out, ...)`` works whatever was imported before.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from remnant.assess.finalize import Outcome


class _CallablePackage(types.ModuleType):
    @property
    def __call__(self) -> Callable[..., Outcome]:
        """The public function itself (:func:`remnant.assess.run.assess_command`): calling the package calls it,
        with its one signature."""
        from remnant.assess.run import assess_command

        return assess_command


sys.modules[__name__].__class__ = _CallablePackage
