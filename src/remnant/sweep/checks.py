"""Checks of a pool spec beyond its shape: registered names, parameters that bind, labels that stay unique.

Run by :func:`remnant.sweep.spec.parse_spec` after the schema, so ``remnant sweep plan`` refuses a spec no run can
honour before anything is minted, fetched or trained. Method, audit and attack parameters are bound against the
registered constructors (:func:`remnant.registry.bind`: an unknown parameter is refused, never defaulted), and a
parameter of known meaning (``lr``, ``epochs``…, ``trainable``) has that meaning's range or form
(:func:`remnant.config.numbers.param_problem`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from remnant.errors import ConfigError
from remnant.sweep.spec import SPEC_RULE, ExistingSpec, GeneratedSpec, MethodGrid


def _refuse(source: str, where: str, problem: str, rule: str = SPEC_RULE) -> ConfigError:
    return ConfigError(f"{source}: field '{where}' {problem}", requirement=rule)


def _bounded(params: Mapping[str, object], where: str, source: str) -> None:
    from remnant.config.numbers import param_problem

    for key, value in params.items():
        problem = param_problem(key, value)
        if problem is not None:
            raise _refuse(source, f"{where}.{key}", problem)


def method_points(grid: MethodGrid) -> list[dict[str, object]]:
    """The hyper-parameter points of one method: explicit points, the grid's product, or one empty point."""
    import itertools

    if grid.points:
        return [dict(p) for p in grid.points]
    keys = sorted(grid.grid)
    return [
        dict(zip(keys, values, strict=True)) for values in itertools.product(*(grid.grid[k] for k in keys))
    ]


def _bind(kind: str, name: str, params: Mapping[str, object], where: str, source: str) -> None:
    from remnant import registry

    try:
        registry.bind(kind, name, params)
    except ConfigError as exc:
        raise _refuse(source, where, f"invalid: {exc}".removesuffix(" (R23)"), "R23") from None


def _check_methods(spec: GeneratedSpec, source: str) -> None:
    removal = spec.removal
    _bounded(removal.common, "removal.common", source)
    labels: list[str] = []
    for i, grid in enumerate(removal.methods):
        where = f"removal.methods[{i}]"
        _bounded(grid.params, f"{where}.params", source)
        for key, values in grid.grid.items():
            for value in values:
                _bounded({key: value}, f"{where}.grid", source)
        for j, point in enumerate(method_points(grid)):
            _bounded(point, f"{where}.points[{j}]", source)
            _bind("method", grid.name, {**removal.common, **grid.params, **point}, where, source)
        labels.append(grid.label or grid.name)
    _unique(labels, "removal.methods (label or name)", source)
    if removal.methods and removal.parent is not None:
        full = [s.label for s in spec.target.strengths]
        if removal.parent not in full:
            raise _refuse(source, "removal.parent", f"names no target strength (strengths: {full})")


def _unique(labels: Iterable[str], where: str, source: str) -> None:
    seen: set[str] = set()
    for label in labels:
        if label in seen:
            raise _refuse(source, where, f"repeats the label {label!r}; labels name models and must differ")
        seen.add(label)


def _check_pack(spec: GeneratedSpec | ExistingSpec, source: str) -> None:
    from remnant.packs.classd import ClassDSpec

    if spec.pack.mint is None:
        return
    known = {f.name for f in dataclasses.fields(ClassDSpec)}
    unknown = sorted(set(spec.pack.mint) - known)
    if unknown:
        raise _refuse(
            source, f"pack.mint.{unknown[0]}", f"is not a mint parameter (known: {sorted(known)})", "R2"
        )


def _check_suite(spec: GeneratedSpec | ExistingSpec, source: str) -> None:
    from remnant.metrics.catalogue import lookup

    suite = spec.suite
    for i, name in enumerate(suite.metrics):
        try:
            lookup(name)
        except ConfigError as exc:
            raise _refuse(
                source, f"suite.metrics[{i}]", f"invalid: {exc}".removesuffix(" (R23)"), "R23"
            ) from None
    if suite.utility != "retain_kappa":
        try:
            lookup(suite.utility)
        except ConfigError:
            raise _refuse(
                source, "suite.utility", "must be retain_kappa or a field metric's name", "R10"
            ) from None
    for i, name in enumerate(suite.audits):
        _check_audit(spec, name, f"suite.audits[{i}]", source)
        _bind("audit", name, suite.audit_params.get(name, {}), f"suite.audit_params.{name}", source)
    for i, name in enumerate(suite.attacks):
        params = suite.attack_params.get(name, {})
        _bounded(params, f"suite.attack_params.{name}", source)
        _bind("attack", name, params, f"suite.attacks[{i}]", source)
    for table, listed in (("audit_params", suite.audits), ("attack_params", suite.attacks)):
        extra = sorted(set(getattr(suite, table)) - set(listed))
        if extra:
            raise _refuse(
                source, f"suite.{table}.{extra[0]}", "gives parameters to a component the suite omits"
            )
    if not (suite.metrics or suite.audits or suite.attacks or suite.kappa):
        raise _refuse(source, "suite", "measures nothing: name metrics, audits, attacks or keep kappa", "R23")


def _check_audit(spec: GeneratedSpec | ExistingSpec, name: str, where: str, source: str) -> None:
    """An audit runs in a sweep when the pool provides the references its class declares and the suite builds
    the inputs of its family (``Audit.references``, ``Audit.family``; C-H7b)."""
    from remnant import registry
    from remnant.sweep.suite import AUDIT_INPUTS

    try:
        cls = registry.get("audit", name)
    except ConfigError as exc:
        raise _refuse(source, where, f"invalid: {exc}", "C-H7") from None
    provided = set(spec.references) if isinstance(spec, ExistingSpec) else {"full", "retain"}
    missing = [r for r in getattr(cls, "references", ()) if r not in provided]
    if missing:
        raise _refuse(
            source,
            where,
            f"{name!r} compares with the reference states {missing}, which the pool does not provide "
            f"(it provides {sorted(provided)}: references.full and references.retain)",
            "C-H7",
        )
    family = getattr(cls, "family", None)
    if family not in AUDIT_INPUTS:
        raise _refuse(
            source,
            where,
            f"{name!r} is a {family} audit; a sweep builds the inputs of the {sorted(AUDIT_INPUTS)} family only",
            "C-H7",
        )


def check_spec(spec: GeneratedSpec | ExistingSpec, *, source: str) -> None:
    """Every check of the module docstring; ConfigError on the first that fails."""
    _check_pack(spec, source)
    _check_suite(spec, source)
    if isinstance(spec, GeneratedSpec):
        _unique((s.label for s in spec.target.strengths), "target.strengths", source)
        _unique((v.label for v in spec.never_saw.variants), "never_saw.variants", source)
        _check_methods(spec, source)
        if spec.suite.audits and not any(s.share == 1.0 for s in spec.target.strengths):
            raise _refuse(
                source, "target.strengths", "needs a share-1 strength: the audits' full reference", "C-H7"
            )


__all__ = ["check_spec", "method_points"]
