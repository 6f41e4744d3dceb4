"""`remnant methods list` and `remnant methods show NAME` (every default visible; R23, R24)."""

from __future__ import annotations

import argparse
import json
from typing import Any


def _describe(name: str) -> dict[str, Any]:
    from remnant import registry

    cls = registry.get("method", name)
    return {
        "name": name,
        "version": registry.version("method", name),
        "kind": cls.kind,
        "formula": cls.formula,
        "source": cls.source,
        "needs_reference": cls.needs_reference,
        "needs_alternates": cls.needs_alternates,
        "needs_control": cls.needs_control,
        "defaults": registry.defaults("method", name),
        "doc": (cls.__doc__ or "").strip(),
    }


def _list(args: argparse.Namespace) -> int:
    from remnant import registry

    rows = [_describe(n) for n in registry.names("method")]
    if args.json:
        print(json.dumps(rows, indent=2, sort_keys=True))
        return 0
    width = max((len(r["name"]) for r in rows), default=4)
    for r in rows:
        print(f"{r['name']:<{width}}  v{r['version']}  {r['kind']:<9}  {r['formula']}")
    return 0


def _show(args: argparse.Namespace) -> int:
    from remnant.errors import ConfigError

    try:
        info = _describe(args.name)
    except ConfigError as exc:
        print(f"remnant methods show: {exc}")
        return 2
    if args.json:
        print(json.dumps(info, indent=2, sort_keys=True))
        return 0
    print(f"{info['name']} (version {info['version']}, {info['kind']} method)")
    print(f"  {info['doc']}")
    print(f"  formula: {info['formula']}")
    print(f"  defaults from: {info['source']}")
    needs = [k for k in ("needs_reference", "needs_control") if info[k]]
    if info["needs_alternates"]:
        needs.append(f"alternates={info['needs_alternates']}")
    print(f"  needs: {', '.join(needs) or 'forget/retain data only'}")
    print("  parameters:")
    for key, value in info["defaults"].items():
        print(f"    {key} = {value!r}")
    return 0


def add_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the `methods` command group."""
    methods = subparsers.add_parser("methods", help="list removal methods and show their defaults")
    sub = methods.add_subparsers(dest="methods_command", required=True)
    lst = sub.add_parser("list", help="every registered removal method with its version and formula")
    lst.add_argument("--json", action="store_true", help="machine-readable output")
    lst.set_defaults(handler=_list)
    show = sub.add_parser("show", help="one method: formula, source of defaults, every parameter")
    show.add_argument("name")
    show.add_argument("--json", action="store_true", help="machine-readable output")
    show.set_defaults(handler=_show)
