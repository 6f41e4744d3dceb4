"""The scope qualifier a verdict travels with (V4).

V4: "A *removed* verdict MUST NOT be stated without its scope qualifier. The conformant phrasing is *removed,
under W-track assessment against [target] at τ = [value], as of [model version]* — never 'removed' unqualified."
remnant gives every verdict the same phrasing (V4 only obliges *removed*), so a reader never meets a bare verdict
word; the validator checks that a *removed* statement's phrase names the track, τ and the model version.
"""

from __future__ import annotations

VERDICTS = ("removed", "hidden", "utility-collapsed", "partial")


def scope_qualifier(*, verdict: str, track: str, target: str, tau: float, model_version: str) -> str:
    """V4's phrase: "removed, under W-track assessment against [target] at τ = [value], as of [model version]".

    τ is written with ``:g`` (0.70 → "0.7"), the form the validator looks for. The same phrasing scopes the
    other verdicts too (Annex E scopes *hidden* the same way).
    """
    if verdict not in VERDICTS:
        raise ValueError(f"verdict must be one of {VERDICTS} (V1), got {verdict!r}")
    if track not in ("W", "Q"):
        raise ValueError(f"track must be 'W' or 'Q' (R0.1), got {track!r}")
    if not target.strip():
        raise ValueError("the scope qualifier needs the target assessed (V4)")
    if not 0.0 <= tau <= 1.0:
        raise ValueError(f"tau must lie in [0, 1], got {tau!r}")
    if not model_version.strip():
        raise ValueError("the scope qualifier needs the model version assessed (V4, V5)")
    return f"{verdict}, under {track}-track assessment against {target} at τ = {tau:g}, as of {model_version}"
