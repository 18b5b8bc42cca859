"""What a tab asks the layer map to show: a layer named by a finding, and the layers it relates to."""

from __future__ import annotations

from dataclasses import dataclass, field

from bringup.core.finding import SEVERITIES

# Verdicts that findings lists also show, read as the nearest severity the map draws.
_AS_SEVERITY = {"failure": "error", "ok": "info"}


@dataclass(frozen=True)
class Highlight:
    """Red marks on the layer map.

    `requested`: the layers a finding names (drawn red, e.g. layer 0 of the PR #32227 crash);
    `related`: the layers that would have been valid (outlined, e.g. the six attention layers);
    `message`: the callout text shown under the map; `severity`: error | warning | info.
    `errors`: a comparison's relative error per block ((index, rel_err or None when not compared)),
    with its `tolerance`: the map then fills each block with its error's colour (style.error_colour).
    """

    requested: list[int] = field(default_factory=list)
    related: list[int] = field(default_factory=list)
    message: str = ""
    severity: str = "error"
    errors: tuple[tuple[int, float | None], ...] = ()
    tolerance: float | None = None

    def error_of(self, indices) -> tuple[bool, float | None]:
        """(compared, worst relative error) over the blocks `indices` (a folded cell stands for several);
        NaN is the worst."""
        known = dict(self.errors)
        values = [known[i] for i in indices if known.get(i) is not None]
        if not values:
            return False, None
        nan = [v for v in values if v != v]
        return True, nan[0] if nan else max(values)

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity {self.severity!r} is not one of {', '.join(SEVERITIES)}")

    @classmethod
    def of(cls, finding) -> "Highlight | None":
        """The marks a finding asks of the map (a Finding, or its `to_json()` dict), or None when it
        names no layer. The one mapping from findings to marks, for every tab.

        A layer-index finding names `requested_layer` (red) and `valid_layers` (outlined); any
        other names `layers` (red), and may name `valid_layers` too (e.g. the attention layers a
        probe should use)."""
        if not finding:
            return None
        f = finding if isinstance(finding, dict) else finding.to_json()
        requested = f.get("requested_layer")
        requested = [requested] if isinstance(requested, int) else list(f.get("layers") or [])
        related = [i for i in (f.get("valid_layers") or []) if i not in requested]
        if not requested and not related:
            return None
        message = f.get("callout") or f.get("title") or ""
        if not message and isinstance(f.get("requested_layer"), int) and related:
            message = (f"{f.get('code') or 'finding'}: layer {f['requested_layer']} is asked for, "
                       f"but the pool holds only layers {', '.join(map(str, related))}")
        severity = str(f.get("severity") or "").lower()
        severity = _AS_SEVERITY.get(severity, severity if severity in SEVERITIES else "info")
        return cls(requested=requested, related=related, message=str(message or f.get("message") or ""),
                   severity=severity)
