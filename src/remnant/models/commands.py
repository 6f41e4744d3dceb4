"""`remnant models fetch NAME`, `remnant models list` and `remnant models identify PATH`."""

from __future__ import annotations

import argparse


def _fetch(args: argparse.Namespace) -> int:
    from remnant.models import zoo

    print(zoo.fetch(args.name))
    return 0


def _identify(args: argparse.Namespace) -> int:
    from remnant.models.device import check_device
    from remnant.models.load import load_model
    from remnant.statement.canonical import canonical_json

    device = check_device(args.device, where="--device")
    # a string: an existing path is a path, else a zoo name or a hub id (docs/formats.md, "Model arguments")
    state = load_model(args.path, dtype=args.dtype, device=device)
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


def add_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
        help="load a model as an assessment would and print its identity JSON (R2, R23)",
    )
    ident.add_argument(
        "path",
        help="a model folder (safetensors), a PEFT LoRA adapter folder, a .gguf file, a zoo name or a hub id "
        "(org/name; from the local Hugging Face cache when offline); see docs/formats.md, Model arguments",
    )
    ident.add_argument("--dtype", default="fp32", choices=("fp32", "bf16", "fp16"))
    ident.add_argument("--device", default="cpu", help="auto, cpu, mps, cuda or cuda:N (default cpu)")
    ident.set_defaults(handler=_identify)
