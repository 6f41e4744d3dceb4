"""`remnant models fetch NAME` and `remnant models list`."""

from __future__ import annotations

import argparse
from typing import Any


def _fetch(args: argparse.Namespace) -> int:
    from remnant.models import zoo

    print(zoo.fetch(args.name))
    return 0


def _list(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from remnant.models import zoo
    from remnant.models.identity import sha256_file

    table = Table(title=f"remnant zoo cache ({zoo.remnant_home()})")
    for col in ("name", "size (MB)", "weights sha256", "path"):
        table.add_column(col)
    for folder in zoo.list_cached():
        size = sum(f.stat().st_size for f in folder.iterdir() if f.is_file())
        weights = ",".join(sha256_file(p)[:16] for p in sorted(folder.glob("*.safetensors")))
        table.add_row(folder.name, f"{size / 1e6:.1f}", weights, str(folder))
    Console().print(table)
    return 0


def add_commands(subparsers: Any) -> None:
    """Register the `models` command group."""
    models = subparsers.add_parser("models", help="fetch and list known small models (the zoo)")
    sub = models.add_subparsers(dest="models_command", required=True)
    fetch = sub.add_parser("fetch", help="fetch a zoo model once and cache it as safetensors")
    fetch.add_argument("name")
    fetch.set_defaults(handler=_fetch)
    lst = sub.add_parser("list", help="show cached zoo models with sizes and weight hashes")
    lst.set_defaults(handler=_list)
