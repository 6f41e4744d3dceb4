"""The assessment: plan (cost before running), run (orchestrator, resumable) and the run manifest (R23-R25).

This package shares its name with the public function ``remnant.assess`` (:func:`remnant.api.assess`). Importing
a subpackage sets it as an attribute of its parent, so once anything has imported ``remnant.assess.*`` (the
function's own first call does), ``remnant.assess`` is this package and no longer the function. The package is
therefore callable, and calling it runs what the function runs (:func:`remnant.assess.run.assess_command`):
``remnant.assess(config, out, ...)`` works whatever was imported before.
"""

from __future__ import annotations

import sys
import types
from typing import Any


class _CallablePackage(types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from remnant.assess.run import assess_command

        return assess_command(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
