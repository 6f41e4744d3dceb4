"""Commands of the statement part: schema, statement example, validate, keys generate, sign, verify (K4-K6)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from remnant.atomic import write_json
from remnant.cli_paths import mark_output, out_file, out_folder
from remnant.errors import ConfigError
from remnant.jsonio import read_json

if TYPE_CHECKING:
    from remnant.statement.validate import ValidationReport

EXIT_OK, EXIT_FAILED = 0, 1


def _schema(args: argparse.Namespace) -> int:
    from remnant.statement.schema import statement_json_schema

    print(json.dumps(statement_json_schema(), indent=2, ensure_ascii=False))
    return EXIT_OK


def _example(args: argparse.Namespace) -> int:
    from remnant.statement.example import example_statement

    out = out_file(args.out, requirement="K4")
    write_json(out, example_statement().model_dump(mode="json", by_alias=True))
    print(args.out)
    return EXIT_OK


#: What a JSON value is, as a message names it.
_JSON_KINDS = {list: "an array", str: "a string", int: "a number", float: "a number", bool: "a boolean"}


def read_statement(path: Path) -> dict[str, Any]:
    """A statement file as a JSON object, read strictly; ConfigError naming the file (K4) otherwise (exit 2)."""
    data = read_json(path, requirement="K4")
    if not isinstance(data, dict):
        kind = "null" if data is None else _JSON_KINDS.get(type(data), type(data).__name__)
        raise ConfigError(f"{path}: a conformance statement is a JSON object, not {kind}", requirement="K4")
    return data


def first_violation(path: Path, report: ValidationReport) -> str:
    """One line naming the file, how many violations, and the first with its requirement."""
    first = report.violations[0]
    message = " ".join(str(first.message).split())
    count = len(report.violations)
    return f"{path}: not conformant ({count} violation{'s' if count != 1 else ''}); first: {first.requirement}: {message}"


def _validate(args: argparse.Namespace) -> int:
    from remnant.statement.validate import validate_statement

    path = Path(args.statement)
    report = validate_statement(read_statement(path))
    print(json.dumps(report.model_dump(mode="json"), indent=2))
    if not report.conformant:  # stdout stays the report; the file is named beside it
        print(f"remnant validate: {first_violation(path, report)}", file=sys.stderr)
    return EXIT_OK if report.conformant else EXIT_FAILED


def _keys(args: argparse.Namespace) -> int:
    from remnant.statement.keys import generate_keypair

    out = out_folder(args.out, requirement="K5", kind="keys")
    private, public = generate_keypair(out)
    mark_output(out, "keys")
    print(f"{private}\n{public}")
    return EXIT_OK


def _sign(args: argparse.Namespace) -> int:
    from remnant.statement.dsse import sign_statement
    from remnant.statement.keys import load_private_key
    from remnant.statement.validate import validate_statement

    path = Path(args.statement)
    out = Path(args.out) if args.out else path.with_name(path.name.removesuffix(".json") + ".dsse.json")
    # the envelope never replaces the statement it signs, nor the key (K5)
    inputs = {"the statement signed": path, "the --key file": args.key}
    out_file(out, requirement="K5", option="--out" if args.out else "envelope", inputs=inputs)
    statement = read_statement(path)
    report = validate_statement(statement)
    if not report.conformant:  # K5: a signature vouches for what it signs; nothing is written
        print(f"remnant sign: refused: {first_violation(path, report)}", file=sys.stderr)
        return EXIT_FAILED
    envelope = sign_statement(statement, load_private_key(Path(args.key)), name=path.name)
    write_json(out, envelope)
    print(out)
    return EXIT_OK


def _verify(args: argparse.Namespace) -> int:
    from remnant.errors import SignatureError
    from remnant.statement.dsse import verify_envelope
    from remnant.statement.keys import load_public_key

    key = load_public_key(Path(args.key))
    envelope = read_json(Path(args.envelope), requirement="K5")
    try:
        statement = verify_envelope(envelope, key)
    except SignatureError as exc:
        print(f"remnant verify: {args.envelope}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except ConfigError as exc:  # not readable as an envelope: bad input (exit 2), naming the file
        raise ConfigError(f"{args.envelope}: {exc}", requirement=exc.requirement) from None
    print(json.dumps({"verified": True, "subject": statement["subject"]}, indent=2))
    return EXIT_OK


def add_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register schema, statement, validate, keys, sign and verify."""
    schema = subparsers.add_parser("schema", help="print a JSON Schema")
    schema_sub = schema.add_subparsers(dest="schema_kind", metavar="KIND", required=True)
    schema_sub.add_parser("statement", help="the conformance statement (K4)").set_defaults(handler=_schema)

    statement = subparsers.add_parser("statement", help="conformance statement tools")
    statement_sub = statement.add_subparsers(dest="statement_command", metavar="ACTION", required=True)
    example = statement_sub.add_parser("example", help="write a complete, conformant example (Annex D.2)")
    example.add_argument("--out", required=True, help="file to write")
    example.set_defaults(handler=_example)

    validate = subparsers.add_parser("validate", help="check a statement's schema and normative consistency")
    validate.add_argument("statement", help="STATEMENT.json")
    validate.set_defaults(handler=_validate)

    keys = subparsers.add_parser("keys", help="signing keys")
    keys_sub = keys.add_subparsers(dest="keys_command", metavar="ACTION", required=True)
    generate = keys_sub.add_parser("generate", help="write DIR/remnant.key (0600) and DIR/remnant.pub")
    generate.add_argument("--out", required=True, help="directory")
    generate.set_defaults(handler=_keys)

    sign = subparsers.add_parser(
        "sign", help="sign a statement as an in-toto Statement in a DSSE envelope (K5)"
    )
    sign.add_argument("statement", help="STATEMENT.json")
    sign.add_argument("--key", required=True, help="PEM private key")
    sign.add_argument("--out", help="envelope path (default STATEMENT.dsse.json beside it)")
    sign.set_defaults(handler=_sign)

    verify = subparsers.add_parser("verify", help="verify a DSSE envelope against a public key (K5)")
    verify.add_argument("envelope", help="ENVELOPE.dsse.json")
    verify.add_argument("--key", required=True, help="PEM public key")
    verify.set_defaults(handler=_verify)
