"""``remnant packs import`` and ``remnant packs export``: TOFU and MUSE folders in, TOFU folders out (R2).

Added to the ``remnant packs`` group that :mod:`remnant.packs.commands` registers (one command group per
concept; this module is listed after it in :data:`remnant.cli.COMMAND_MODULES`, as formats builds on packs).
"""

from __future__ import annotations

import argparse

from remnant.errors import ConfigError

#: Options of ``packs import`` that only a TOFU folder has splits for.
_TOFU_ONLY = ("forget", "retain", "holdout", "forget_perturbed", "retain_eval", "general", "rows_per_entity")


def _none(value: str) -> str | None:
    return None if value.lower() == "none" else value


def add_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``import`` and ``export`` to the ``remnant packs`` group registered before this module."""
    packs = subparsers.choices["packs"]
    # argparse exposes a parser's subcommands only through its actions list
    psub = next(a for a in packs._actions if isinstance(a, argparse._SubParsersAction))
    imp = psub.add_parser("import", help="read a TOFU or MUSE folder as a target pack (docs/formats.md)")
    imp.add_argument("--format", dest="fmt", choices=("tofu", "muse"), required=True)
    imp.add_argument("source", help="the dataset folder (JSON lines or Parquet, flat or as a Hub snapshot)")
    imp.add_argument("--out", required=True, help="the pack folder to write")
    imp.add_argument("--forget", default=None, help="TOFU forget split (default forget10)")
    imp.add_argument("--retain", default=None, help="TOFU retain split (default retain90)")
    imp.add_argument("--holdout", default=None, help="TOFU holdout split, or none (default holdout10)")
    imp.add_argument("--forget-perturbed", default=None, help="default <forget>_perturbed")
    imp.add_argument("--retain-eval", default=None, help="default retain_perturbed; none for no retain")
    imp.add_argument(
        "--general", nargs="*", default=None, help="default real_authors_perturbed world_facts_perturbed"
    )
    imp.add_argument("--rows-per-entity", type=int, default=None, help="TOFU rows per author (default 20)")
    imp.add_argument(
        "--relearn-fraction", type=float, default=0.5, help="share of forget authors in R (C-W6)"
    )
    imp.add_argument("--class", dest="pack_class", choices=("C", "D"), default="C")
    imp.add_argument(
        "--id", dest="pack_id", default=None, help="pack id (default tofu-<forget>-<retain>, muse)"
    )
    imp.set_defaults(handler=_import)
    exp = psub.add_parser("export", help="write a target pack as a TOFU folder (docs/formats.md)")
    exp.add_argument("--format", dest="fmt", choices=("tofu",), required=True)
    exp.add_argument("pack")
    exp.add_argument(
        "--out", required=True, help="a new folder (or one an earlier export made: replaced whole)"
    )
    exp.add_argument("--forget", default="forget", help="name of the forget split (default forget)")
    exp.add_argument("--retain", default="retain", help="name of the retain split (default retain)")
    exp.add_argument("--holdout", default="holdout", help="name of the holdout split (default holdout)")
    exp.add_argument(
        "--no-utility-sets",
        dest="utility_sets",
        action="store_false",
        help="do not write remnant's shipped real_authors_perturbed and world_facts_perturbed where the pack "
        "has none (TOFU's model_utility reads them)",
    )
    exp.set_defaults(handler=_export)


def _import(args: argparse.Namespace) -> int:
    from remnant.cli_paths import mark_output, out_folder
    from remnant.formats.muse_pack import muse_to_pack
    from remnant.formats.tofu_pack import GENERAL_SPLITS, TOFU_ROWS_PER_AUTHOR, tofu_to_pack
    from remnant.packs.schema import Pack, write_pack

    out_folder(args.out, requirement="R2", kind="pack", inputs={"the dataset folder SOURCE": args.source})
    pack: Pack
    if args.fmt == "muse":
        given = [f"--{name.replace('_', '-')}" for name in _TOFU_ONLY if getattr(args, name) is not None]
        if given:
            raise ConfigError(
                f"{given[0]} names a TOFU split; a MUSE folder's parts are fixed", requirement="R2"
            )
        pack = muse_to_pack(
            args.source,
            relearn_fraction=args.relearn_fraction,
            pack_class=args.pack_class,
            pack_id=args.pack_id,
        )
    else:
        pack = tofu_to_pack(
            args.source,
            args.forget or "forget10",
            args.retain or "retain90",
            "holdout10" if args.holdout is None else _none(args.holdout),
            forget_perturbed=args.forget_perturbed,
            retain_eval="retain_perturbed" if args.retain_eval is None else _none(args.retain_eval),
            general=GENERAL_SPLITS if args.general is None else tuple(args.general),
            rows_per_entity=args.rows_per_entity or TOFU_ROWS_PER_AUTHOR,
            relearn_fraction=args.relearn_fraction,
            pack_class=args.pack_class,
            pack_id=args.pack_id,
        )
    write_pack(pack, args.out)
    mark_output(args.out, "pack")
    counts = ", ".join(f"{name} {len(ids)}" for name, ids in pack.manifest.splits.items())
    print(
        f"imported {args.fmt} {args.source} as {pack.manifest.id}: {counts} -> {args.out}  digest {pack.digest}"
    )
    return 0


def _export(args: argparse.Namespace) -> int:
    from remnant.cli_paths import out_folder
    from remnant.formats.export import pack_to_tofu
    from remnant.packs.schema import load_pack

    out_folder(args.out, requirement="R2", kind="tofu", inputs={"the pack folder": args.pack})
    pack = load_pack(args.pack)
    result = pack_to_tofu(
        pack,
        args.out,
        forget=args.forget,
        retain=args.retain,
        holdout=args.holdout,
        utility_sets=args.utility_sets,
        marked=True,
    )
    print(f"exported {pack.manifest.id} as TOFU -> {result.out}")
    for name, rows in result.files.items():
        print(f"  {name}: {rows} rows")
    for name, used in result.shipped.items():
        print(
            f"  {name}: not from the pack: remnant's shipped general-utility set {used.file} v{used.version} "
            f"sha256 {used.sha256} (TOFU's model_utility reads it; independent of the target, R10)"
        )
    for reason, n in result.left_out.items():
        print(f"  left out: {n} {reason}")
    return 0
