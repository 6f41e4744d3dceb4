"""The scope qualifier a verdict travels with (V4) and the facts V3 asks to be reported beside it.

V4: "A *removed* verdict MUST NOT be stated without its scope qualifier. The conformant phrasing is *removed,
under W-track assessment against [target] at τ = [value], as of [model version]* — never 'removed' unqualified."
remnant gives every verdict the same phrasing (V4 only obliges *removed*), so a reader never meets a bare verdict
word; the validator checks that a *removed* statement's phrase names the track, τ and the model version.
"""

from __future__ import annotations

import datetime as dt

VERDICTS = ("removed", "hidden", "utility-collapsed", "partial")
TRACKS = ("W", "Q")


def _check(verdict: str, track: str, target: str, tau: float, model_version: str) -> None:
    if verdict not in VERDICTS:
        raise ValueError(f"verdict must be one of {VERDICTS} (V1), got {verdict!r}")
    if track not in TRACKS:
        raise ValueError(f"track must be 'W' or 'Q' (R0.1), got {track!r}")
    if not target.strip():
        raise ValueError("the scope qualifier needs the target assessed (V4)")
    if not 0.0 <= tau <= 1.0:
        raise ValueError(f"tau must lie in [0, 1], got {tau!r}")
    if not model_version.strip():
        raise ValueError("the scope qualifier needs the model version assessed (V4, V5)")


def scope_qualifier(*, verdict: str, track: str, target: str, tau: float, model_version: str) -> str:
    """V4's phrase: "removed, under W-track assessment against [target] at τ = [value], as of [model version]".

    τ is written with ``:g`` (0.70 → "0.7"), the form the validator looks for. The same phrasing scopes the
    other verdicts too (Annex E scopes *hidden* the same way).
    """
    _check(verdict, track, target, tau, model_version)
    return f"{verdict}, under {track}-track assessment against {target} at τ = {tau:g}, as of {model_version}"


def verdict_report_line(
    *,
    verdict: str,
    track: str,
    class_: str,
    target: str,
    tau: float,
    phi: float,
    n: int,
    assessed_on: dt.date,
    model_version: str,
) -> str:
    """The verdict with everything V3 requires beside it: track, class, τ, φ, n, date and model version."""
    _check(verdict, track, target, tau, model_version)
    if class_ not in ("C", "D"):
        raise ValueError(f"class must be 'C' or 'D' (§1.1), got {class_!r}")
    scope = scope_qualifier(verdict=verdict, track=track, target=target, tau=tau, model_version=model_version)
    return f"{scope} (Class {class_}, φ = {phi:g}, n = {n}, assessed {assessed_on.isoformat()})"
