"""``remnant verdict FACTS.json``: print the verdict object drawn from a facts file (V1, V1a).

The file is the facts object itself, or any JSON object carrying it under ``facts`` — a published conformance
test vector or a conformance statement — so a vector or a statement can be re-judged as it stands.
Exit codes: 0 a verdict was drawn; 2 the file cannot be read or its facts are invalid (the message names the file
and the field). No torch is imported.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from remnant.errors import ConfigError
from remnant.jsonio import read_json

if TYPE_CHECKING:
    from remnant.standard.facts import VerdictFacts

EXIT_OK = 0


def load_facts(path: Path) -> VerdictFacts:
    """Read and validate the verdict facts in ``path``; ConfigError naming the file and each bad field."""
    from pydantic import ValidationError

    from remnant.standard.facts import VerdictFacts

    data = read_json(path, requirement="V1")
    prefix = ""
    if isinstance(data, dict) and isinstance(data.get("facts"), dict):
        data, prefix = data["facts"], "facts."
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: verdict facts must be a JSON object (docs/vectors.md)")
    try:
        return VerdictFacts.model_validate(data)
    except ValidationError as exc:
        lines = [f"{path}: invalid verdict facts:"]
        for err in exc.errors():
            where = prefix + ".".join(str(part) for part in err["loc"]) if err["loc"] else prefix.rstrip(".")
            message = str(err["msg"]).removeprefix("Value error, ")
            lines.append(f"  {where or '<root>'}: {message}")
        raise ConfigError("\n".join(lines)) from exc


def _verdict(args: argparse.Namespace) -> int:
    from remnant.standard.verdict import decide

    result = decide(load_facts(Path(args.facts)))
    print(json.dumps(result.to_json(), indent=2, ensure_ascii=False))
    return EXIT_OK


def add_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``remnant verdict``."""
    parser = subparsers.add_parser(
        "verdict",
        help="draw the verdict (V1) from a verdict-facts JSON file",
        description=(
            "Print the verdict object (verdict, reasons, g_star, g_star_ci95, decisive_attacks, rule_ids) drawn "
            "from FACTS.json under the Yuyari Standard v0.3 (V1, V1a). FACTS.json holds the facts object, or "
            "carries it under 'facts' (a test vector or a conformance statement)."
        ),
    )
    parser.add_argument("facts", metavar="FACTS.json", help="verdict facts (docs/vectors.md)")
    parser.set_defaults(handler=_verdict)
