"""``remnant list {methods,attacks,metrics,audits} [--json]``: every registered component of a kind with its
version and source: ``built-in``, or the distribution that added it through an entry point (K4, R23).

Works where torch is not installed: the built-ins come from :data:`remnant.builtin_index.BUILTIN_INDEX` (the
packages registering them import torch) and only the plugins' own modules are imported. A broken plugin is listed
as broken, with why, after the one warning :func:`remnant.registry.plugins` gives.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

#: The command's word for each kind.
KINDS: dict[str, str] = {"methods": "method", "attacks": "attack", "metrics": "metric", "audits": "audit"}

BUILT_IN = "built-in"


def listing(kind: str) -> list[dict[str, Any]]:
    """Rows ``{name, version, source, error}`` of ``kind``: built-ins, then each plugin's components (or the
    plugin itself, broken, with ``name`` its entry point's name and ``version`` its distribution's)."""
    from remnant import registry
    from remnant.builtin_index import BUILTIN_INDEX

    rows = [
        {"name": n, "version": v, "source": BUILT_IN, "error": None} for n, v in BUILTIN_INDEX[kind].items()
    ]
    for plugin in registry.plugins(kind):
        source = f"{plugin.distribution} {plugin.version}"
        if plugin.error is not None:
            name = plugin.entry_point.split("=", 1)[0].strip()
            rows.append({"name": name, "version": "-", "source": source, "error": plugin.error})
            continue
        versions = registry.registered_now(kind)
        rows += [{"name": n, "version": versions[n], "source": source, "error": None} for n in plugin.names]
    return rows


def _run(args: argparse.Namespace) -> int:
    rows = listing(KINDS[args.kind])
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    width = max((len(r["name"]) for r in rows), default=4)
    vwidth = max((len(r["version"]) for r in rows), default=7)
    for r in rows:
        broken = f" BROKEN: {r['error']}" if r["error"] is not None else ""
        print(f"{r['name']:<{width}}  {r['version']:<{vwidth}}  {r['source']}{broken}")
    return 0


def add_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``remnant list``."""
    p = subparsers.add_parser(
        "list",
        help="registered methods, attacks, metrics or audits: name, version, source (built-in or plugin)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("kind", choices=tuple(KINDS), help="which components to list")
    p.add_argument("--json", action="store_true", help="a JSON list of {name, version, source, error}")
    p.set_defaults(handler=_run)


__all__ = ["KINDS", "add_commands", "listing"]
