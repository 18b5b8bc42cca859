"""A block's (or kernel's) error against its tolerance, as a band and a colour: one scale for the
Numerics page, the layer map and the exported report."""

from __future__ import annotations

ERROR_COLORS = {"ok": "#93C47D", "near": "#FFD966", "beyond": "#E06666", "none": "#C9CED8"}


def error_band(rel_err: float | None, tolerance: float | None) -> str:
    """ok (under half the tolerance), near (up to it), beyond (past it, or NaN), none (not compared)."""
    if rel_err is None or tolerance is None:
        return "none"
    if not rel_err <= tolerance:  # NaN included
        return "beyond"
    return "ok" if rel_err < tolerance / 2 else "near"
