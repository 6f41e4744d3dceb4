"""``remnant demo --vectors``: the verdict engine over the published conformance test vectors, with what each
verdict licenses (V6).

``remnant demo`` assesses a real model (:mod:`remnant.demo`) and keeps this table as its appendix. It runs
:func:`remnant.standard.verdict.decide` over every vector installed with remnant (``remnant/data/vectors/``,
package data; the tests read the same files) and prints one row per vector: the verdict beside its customer gloss
(V6: the normative term alongside), g* with its two-sided 95% Wilson interval (R19), the smallest n behind it and
the highest tier that n can support at zero recoveries (R21), the rule ids the reasons cite, and what the verdict
licenses (V1's table). Every row is checked against the vector's expected verdict, so the demo exits 1 if the
engine and its published vectors ever disagree. A vector whose facts the engine must refuse (Annex D.1 declares no
utility floor) is shown as refused, naming the field.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from remnant.errors import ConfigError
from remnant.jsonio import read_json

if TYPE_CHECKING:
    from rich.table import Table

#: The published conformance test vectors, package data (docs/vectors.md): the one copy, read by the tests and by
#: ``remnant demo --vectors`` from a checkout and from an installed wheel alike.
PACKAGED_VECTORS = Path(__file__).resolve().parent / "data" / "vectors"


@dataclass(frozen=True)
class VectorRow:
    """One vector through the verdict engine: what it gave, what the vector expects, and what the verdict licenses."""

    vector: str
    verdict: str | None
    expected: str | None
    refused: str | None
    g_star: float | None
    g_star_ci95: tuple[float, float] | None
    n: int | None
    r21_ceiling: str | None
    rule_ids: tuple[str, ...]
    gloss: str
    licenses: str

    @property
    def agrees(self) -> bool:
        """The engine gave the vector's expected verdict (or refused what the vector expects refused)."""
        return self.verdict == self.expected


def _row(path: Path) -> VectorRow:
    from pydantic import ValidationError

    from remnant.standard.derive import behavioural_n, r21_ceiling
    from remnant.standard.facts import VerdictFacts
    from remnant.standard.gloss import gloss
    from remnant.standard.verdict import decide

    data = read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("facts"), dict):
        raise ConfigError(f"{path}: a test vector holds its verdict facts under 'facts'")
    expected_block = data.get("expected") or {}
    error = expected_block.get("error")
    expected = f"refused: {error['field']}" if isinstance(error, dict) else expected_block.get("verdict")
    try:
        facts = VerdictFacts.model_validate(data["facts"])
    except ValidationError as exc:
        fields = sorted({str(err["loc"][0]) for err in exc.errors() if err["loc"]})
        refused = f"refused: {', '.join(fields) or '<root>'}"
        return VectorRow(
            vector=path.stem,
            verdict=refused if error else None,
            expected=expected,
            refused=str(exc.errors()[0]["msg"]),
            g_star=None,
            g_star_ci95=None,
            n=None,
            r21_ceiling=None,
            rule_ids=tuple(data.get("rules") or ()),
            gloss="no verdict",
            licenses="Nothing: the facts are refused, so no verdict is drawn.",
        )
    result = decide(facts)
    # the facts as validated, read by the rules the tier reads them with (R21; Class D's bar is D-5.1's)
    validated = facts.model_dump(by_alias=True)
    n = behavioural_n(validated)
    ceiling = r21_ceiling(validated, n) if n is not None else None
    g = gloss(result.verdict)
    return VectorRow(
        vector=path.stem,
        verdict=result.verdict,
        expected=expected,
        refused=None,
        g_star=result.g_star,
        g_star_ci95=result.g_star_ci95,
        n=n,
        r21_ceiling=ceiling,
        rule_ids=result.rule_ids,
        gloss=g.with_term,
        licenses=g.licenses_short,
    )


def vector_rows(directory: Path | None = None) -> list[VectorRow]:
    """Every vector in ``directory`` (default: the packaged vectors) through the verdict engine, by name;
    ConfigError when it holds none."""
    path = directory if directory is not None else PACKAGED_VECTORS
    if not path.is_dir() or not any(path.glob("*.json")):
        raise ConfigError(
            f"{path}: no conformance test vectors (*.json) found; `remnant demo --vectors` reads the vectors "
            "installed with remnant, or the folder passed as --vectors DIR"
        )
    return [_row(vector) for vector in sorted(path.glob("*.json"))]


def _interval(ci: tuple[float, float] | None) -> str:
    return "—" if ci is None else f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def vector_table(rows: list[VectorRow] | None = None) -> Table:
    """A rich table of the vectors: verdict (V6 gloss alongside), g* and its 95% interval, n and its R21 ceiling,
    rule ids, and what the verdict licenses."""
    from rich.table import Table

    table = Table(
        title="Yuyari Standard v0.3: the verdict engine over remnant's published conformance test vectors",
        caption=(
            "g*: largest admitted recovery with its two-sided 95% Wilson interval (R19). R21 ceiling: the highest "
            "tier the smallest n could support at zero recoveries; tiers are a separate instrument (T1). "
            "Glosses in the customer register (V6), normative term alongside."
        ),
    )
    table.add_column("vector", overflow="fold")
    table.add_column("verdict (V6)", overflow="fold")
    table.add_column("ok", justify="center")
    table.add_column("g*", justify="right")
    table.add_column("95% CI", justify="right", no_wrap=True)
    table.add_column("n (R21)", justify="right")
    table.add_column("rule ids", overflow="fold")
    table.add_column("licenses (V1)", overflow="fold", ratio=1)
    for row in rows if rows is not None else vector_rows():
        table.add_row(
            row.vector,
            row.gloss if row.verdict and not row.verdict.startswith("refused") else str(row.verdict),
            "✓" if row.agrees else f"✗ expected {row.expected}",
            "—" if row.g_star is None else f"{row.g_star:.3f}",
            _interval(row.g_star_ci95),
            "—" if row.n is None else f"{row.n} (≤{row.r21_ceiling})",
            " ".join(row.rule_ids),
            row.licenses,
        )
    return table


def gloss_table() -> Table:
    """What each verdict licenses and does not license (V1's table, V2, V4, V5, V6), one row per verdict."""
    from rich.table import Table

    from remnant.standard.gloss import GLOSSES

    table = Table(title="What each verdict licenses (V1), in the customer register (V6)", show_lines=True)
    table.add_column("verdict", no_wrap=True)
    table.add_column("customer gloss", overflow="fold")
    table.add_column("licenses", overflow="fold", ratio=2)
    table.add_column("does not license", overflow="fold", ratio=3)
    for g in GLOSSES.values():
        gloss_text = g.plain if g.from_standard else f"{g.plain} (remnant's; V6 gives none)"
        table.add_row(
            g.verdict, gloss_text, g.licenses, "\n".join(f"• {item}" for item in g.does_not_license)
        )
    return table


__all__ = ["PACKAGED_VECTORS", "VectorRow", "gloss_table", "vector_rows", "vector_table"]
