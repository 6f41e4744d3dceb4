"""A Ray worker setup hook for the cluster test: any file operation of a task under the driver's sweep folder
(``REMNANT_TEST_FORBIDDEN``) is refused and logged to ``REMNANT_TEST_GUARD_LOG``, so the test sees a task that
reads the driver's disk instead of getting its inputs with the task (docs/sweep.md, Running on a cluster)."""

from __future__ import annotations

import os
import sys
from typing import Any

#: Audit events that name a path a process opens, lists, or changes.
_EVENTS = frozenset(
    {"open", "os.listdir", "os.scandir", "os.mkdir", "os.rename", "os.remove", "shutil.rmtree"}
)


def guard() -> None:
    forbidden = os.path.abspath(os.environ["REMNANT_TEST_FORBIDDEN"])
    log = os.environ["REMNANT_TEST_GUARD_LOG"]

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event not in _EVENTS or not args or not isinstance(args[0], str | bytes | os.PathLike):
            return
        path = os.path.abspath(os.fsdecode(args[0]))
        if path == forbidden or path.startswith(forbidden + os.sep):
            with open(log, "a", encoding="utf-8") as fh:  # the log is outside the forbidden folder
                fh.write(f"{event} {path}\n")
            raise PermissionError(f"a Ray task touched the driver's sweep folder: {event} {path}")

    sys.addaudithook(hook)
