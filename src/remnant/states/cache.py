"""A worker process's loaded model states, kept for its next tasks: least recently used first out, within a byte
budget.

A sweep runs one task per model, and every task that audits reads the same two reference states (the full install
and a retain-only install, UDS). Loading a state means reading the base model, applying its stored chain and
checking the weights against their pin (R23), so each task loading them afresh repeats the same work. The cache
keeps what a process loaded, keyed by the state's digest and what else decides the loaded tensors (the store, the
run, the device, the dtype), and hands the same object to every later reader: a reader that changes weights
(training, fake quantisation) takes its own copy. Entries are kept for one run at a time (the first load of
another run empties it), so a store changed between two runs in one process is read and checked again. The budget
is ``REMNANT_MODEL_CACHE_MB`` (default 16384, counted on whichever device the states are on; 0 turns the cache
off): a state larger than the whole budget is loaded and not kept.

This is the one process-wide object in remnant, deliberately: a Ray worker process runs many tasks, and only a
per-process cache lets them share what the first one loaded. Everything in it is keyed by content digests, so
no task can see another run's or another store's state.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

DEFAULT_MB = 16384  # the base and two references of a 1B-parameter model in fp32, with room

#: What one load returns (a model, a loaded state): the cache keeps it as given.
T = TypeVar("T")


def model_bytes(value: Any) -> int:
    """Bytes of the tensors of ``value`` (a model, or an object with a ``model`` attribute); 0 when it has none."""
    model = getattr(value, "model", value)
    tensors = [*model.parameters(), *model.buffers()] if hasattr(model, "parameters") else []
    return sum(int(t.numel()) * int(t.element_size()) for t in tensors)


@dataclass
class ModelCache:
    """Loaded states by key (module docstring); ``loads`` counts the loads it could not answer from memory."""

    budget: int
    loads: int = 0
    hits: int = 0
    _entries: OrderedDict[Hashable, tuple[object, int]] = field(default_factory=OrderedDict)
    _scope: Hashable = None
    _lock: threading.RLock = field(default_factory=threading.RLock)

    def get(self, scope: Hashable, key: Hashable, load: Callable[[], T]) -> T:
        """The state ``key`` of run ``scope``: kept, or ``load()``-ed (and kept when it fits the budget)."""
        with self._lock:
            if scope != self._scope:
                self._entries.clear()
                self._scope = scope
            if key in self._entries:
                self._entries.move_to_end(key)
                self.hits += 1
                return cast(T, self._entries[key][0])  # stored by a load of the same key
            value = load()
            self.loads += 1
            size = model_bytes(value)
            if size <= self.budget:
                self._entries[key] = (value, size)
                while sum(s for _, s in self._entries.values()) > self.budget:
                    self._entries.popitem(last=False)
            return value


_WORKER: ModelCache | None = None


def worker_cache() -> ModelCache:
    """This process's cache (module docstring: the one process-wide object, and why)."""
    global _WORKER
    if _WORKER is None:
        text = os.environ.get("REMNANT_MODEL_CACHE_MB", "").strip() or str(DEFAULT_MB)
        if not text.isdigit():
            from remnant.errors import ConfigError

            raise ConfigError(
                f"REMNANT_MODEL_CACHE_MB={text!r}: not a whole number of megabytes", requirement="R23"
            )
        _WORKER = ModelCache(budget=int(text) * 2**20)
    return _WORKER


__all__ = ["DEFAULT_MB", "ModelCache", "model_bytes", "worker_cache"]
