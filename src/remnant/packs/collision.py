"""Real-entity collision filter (D2): minted name tokens must not match a real first name or surname.

The list is the US Census name lists shipped in the PyPI package ``names`` (pinned, version recorded).
Its data files are read directly; the package is never imported. A token matches when it equals, case-folded,
an entry of the female/male first-name or surname lists. Towns and companies are screened token by token the
same way (a stem such as ``Kelly`` in ``Kellyford`` is also rejected).
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from remnant.errors import PackError
from remnant.packs.schema import CollisionFilter

FILTER_NAME = "us-census-names (PyPI names)"
_FILES = ("dist.female.first", "dist.male.first", "dist.all.last")


@dataclass(frozen=True)
class CollisionScreen:
    """A loaded real-entity list; ``is_real`` tells whether a candidate collides (D2)."""

    name: str
    version: str
    source: str
    entries: frozenset[str]

    def is_real(self, candidate: str) -> bool:
        """True when any whitespace token of ``candidate`` (or its stem before a place suffix) is a real name."""
        for token in candidate.replace("-", " ").split():
            low = token.casefold()
            if low in self.entries:
                return True
            for suffix in ("ford", "mere", "holt", "vale", "by", "stead", "wick", "ton"):
                if low.endswith(suffix) and low[: -len(suffix)] in self.entries:
                    return True
        return False

    def record(self, rejected: int) -> CollisionFilter:
        """What a pack manifest records about this filter (D2): its name, version, size and rejections."""
        return CollisionFilter(
            name=self.name,
            version=self.version,
            source=self.source,
            entries=len(self.entries),
            rejected=rejected,
        )


@functools.cache
def load_census_screen() -> CollisionScreen:
    """Load the census lists from the installed ``names`` distribution (PackError if it is missing).

    Read once per process (the census lists are long, and every mint screens with it): the installed files do not
    change under a running process, and the screen is immutable. A missing package raises on every call (a raised
    call is not cached)."""
    spec = importlib.util.find_spec("names")
    if spec is None or spec.origin is None:
        raise PackError(
            "collision filter: the 'names' package (pinned in pyproject) is not installed", requirement="D2"
        )
    root = Path(spec.origin).parent
    entries: set[str] = set()
    for fname in _FILES:
        path = root / fname
        if not path.is_file():
            raise PackError(f"collision filter: {path} missing", requirement="D2")
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                entries.add(line.split()[0].casefold())
    version = importlib.metadata.version("names")
    return CollisionScreen(FILTER_NAME, version, f"names=={version}:" + ",".join(_FILES), frozenset(entries))
