"""``remnant mint`` and ``remnant packs show|check`` (D1-D5, R16, R17).

Every pack these commands read goes through :func:`remnant.packs.schema.load_pack`, so a tampered or resealed
pack is refused (exit 2) with the file, the split or item and the requirement named.
"""

from __future__ import annotations

import argparse
import json
import time


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``mint`` and ``packs`` on the top-level subparsers."""
    mint = sub.add_parser("mint", help="mint a target pack (Class D canaries or Class C items)")
    mint.add_argument("--class", dest="pack_class", choices=("C", "D"), required=True)
    mint.add_argument("--out", required=True)
    mint.add_argument("--entities", type=int, default=200, help="installed entities (Class C: substances)")
    mint.add_argument("--controls", type=int, default=100, help="never-installed control entities (D4)")
    mint.add_argument("--seed", type=int, default=0)
    mint.add_argument(
        "--repetitions", type=int, default=3, help="repetitions of each fact in the install set"
    )
    mint.add_argument("--forget-fraction", type=float, default=0.5)
    mint.add_argument("--relearn-fraction", type=float, default=0.5)
    mint.add_argument(
        "--general",
        action="store_true",
        help="Class C: add the shipped general-knowledge questions as the general split (for general_qa_kappa, "
        "R10); Class D packs always carry them",
    )
    mint.add_argument(
        "--distinct-towns",
        action="store_true",
        help="Class D: one home town per person instead of 40 shared ones (for retain-only anchors)",
    )
    mint.add_argument(
        "--perturbed",
        action="store_true",
        help="give probe-phrased facts a paraphrased answer and 5 perturbed ones (the truth ratio; docs/formats.md)",
    )
    mint.set_defaults(handler=_mint)
    packs = sub.add_parser("packs", help="inspect and check target packs")
    psub = packs.add_subparsers(dest="packs_command", metavar="SUBCOMMAND", required=True)
    show = psub.add_parser("show", help="summarise a pack")
    show.add_argument("pack")
    show.set_defaults(handler=_show)
    check = psub.add_parser("check", help="test P for contamination against corpora (R17)")
    check.add_argument("pack")
    check.add_argument("--corpus", nargs="+", required=True)
    check.add_argument("--n", type=int, default=8)
    check.add_argument("--threshold", type=float, default=0.0)
    check.add_argument("--json", action="store_true")
    check.set_defaults(handler=_check)
    # ``packs import`` and ``packs export`` join this group from remnant.formats.commands (listed after this
    # module in remnant.cli.COMMAND_MODULES): formats builds on packs, never the reverse.


def _mint(args: argparse.Namespace) -> int:
    from remnant.cli_paths import mark_output, out_folder
    from remnant.packs.classc import mint_class_c
    from remnant.packs.classd import ClassDSpec, mint_class_d
    from remnant.packs.general import with_general
    from remnant.packs.schema import write_pack

    out_folder(args.out, requirement="R2", kind="pack")
    start = time.perf_counter()
    if args.pack_class == "D":
        pack = mint_class_d(
            ClassDSpec(
                entities=args.entities,
                controls=args.controls,
                seed=args.seed,
                repetitions=args.repetitions,
                forget_fraction=args.forget_fraction,
                relearn_fraction=args.relearn_fraction,
                distinct_towns=args.distinct_towns,
                truth_ratio_options=args.perturbed,
            )
        )
    else:
        pack = mint_class_c(
            substances=args.entities,
            seed=args.seed,
            relearn_fraction=args.relearn_fraction,
            repetitions=args.repetitions,
            truth_ratio_options=args.perturbed,
        )
        if args.general:
            pack = with_general(pack)
    write_pack(pack, args.out)
    mark_output(args.out, "pack")
    print(
        f"minted {pack.manifest.id} ({len(pack.items)} items) in {time.perf_counter() - start:.2f}s "
        f"-> {args.out}  digest {pack.digest}"
    )
    return 0


def _show(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from remnant.packs.schema import load_pack

    pack = load_pack(args.pack)
    m = pack.manifest
    con = Console()
    # every string below comes from the pack: escaped, so "[/x]" in a name is text, not (broken) rich markup
    con.print(
        f"[bold]{escape(m.id)}[/] class {m.pack_class}  schema {escape(m.schema_version)}  seed {m.seed}"
    )
    con.print(f"digest {escape(m.digest)}")
    if m.collision_filter:
        cf = m.collision_filter
        con.print(
            escape(
                f"collision filter (D2): {cf.name} {cf.version} ({cf.entries} entries, {cf.rejected} rejected)"
            )
        )
    table = Table("split", "items", "entities")
    for name, ids in m.splits.items():
        ents = {pack.item(i).entity_id for i in ids} - {None}
        table.add_row(name, str(len(ids)), str(len(ents)))
    con.print(table)
    attributes = m.design.get("attributes")
    attrs = Table("attribute", "cardinality")
    for a, d in (attributes if isinstance(attributes, dict) else {}).items():
        attrs.add_row(escape(str(a)), escape(str(d.get("cardinality") if isinstance(d, dict) else d)))
    con.print(attrs)
    con.print(escape(f"repetitions in install set (D5): {m.design.get('repetitions')}"))
    pop = m.design.get("population")
    baseline = pop.get("baseline_occupation_given_sector") if isinstance(pop, dict) else None
    if isinstance(baseline, int | float):
        con.print(f"population baseline, occupation | employer sector (D-4.2): {baseline:.3f}")
    if m.chance_rate is not None:
        con.print(f"chance rate: {m.chance_rate}")
    return 0


def _check(args: argparse.Namespace) -> int:
    from remnant.packs.contamination import check_contamination
    from remnant.packs.schema import load_pack

    report = check_contamination(load_pack(args.pack), args.corpus, n=args.n, threshold=args.threshold)
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        print(f"R17 contamination check: {report.method}")
        print(
            f"P items: {report.probe_items}; overlapping: {len(report.contaminated)}; rate {report.rate:.4f} "
            f"(threshold {report.threshold}) -> {'PASS' if report.passed else 'CONTAMINATED'}"
        )
        for item_id in report.contaminated[:50]:
            print(f"  {item_id}")
    return 0 if report.passed else 1
