"""`remnant models fetch NAME`, `remnant models list` and `remnant models identify PATH`."""

from __future__ import annotations

import argparse
from typing import Any


def _fetch(args: argparse.Namespace) -> int:
    from remnant.models import zoo

    print(zoo.fetch(args.name))
    return 0


def _identify(args: argparse.Namespace) -> int:
    from pathlib import Path

    from remnant.models.load import load_model
    from remnant.statement.canonical import canonical_json

    state = load_model(Path(args.path), dtype=args.dtype, device=args.device)
    print(canonical_json(state.identity.model_dump(mode="json")).decode("utf-8"))
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
    ident = sub.add_parser(
        "identify",
        help="load a model folder or .gguf file as an assessment would and print its identity JSON (R2, R23)",
    )
    ident.add_argument("path", help="a model folder (safetensors) or a .gguf file; never a hub id")
    ident.add_argument("--dtype", default="fp32", choices=("fp32", "bf16", "fp16"))
    ident.add_argument("--device", default="cpu")
    ident.set_defaults(handler=_identify)
