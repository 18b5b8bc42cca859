"""What a tab asks the layer map to show: a layer named by a finding, and the layers it relates to."""

from __future__ import annotations

from dataclasses import dataclass, field

SEVERITIES = ("error", "warning", "info")


@dataclass(frozen=True)
class Highlight:
    """Red marks on the layer map.

    `requested`: the layers a finding names (drawn red, e.g. layer 0 of the PR #32227 crash);
    `related`: the layers that would have been valid (outlined, e.g. the six attention layers);
    `message`: the callout text shown under the map; `severity`: error | warning | info.
    """

    requested: list[int] = field(default_factory=list)
    related: list[int] = field(default_factory=list)
    message: str = ""
    severity: str = "error"

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity {self.severity!r} is not one of {', '.join(SEVERITIES)}")
