"""A finding: one thing a check found, said for people (what and why, what to change) and in the
target engine's own words where the engine would fail.

Shared by the rules, the device probe and the GUI's findings lists, so all of them read alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field

SEVERITIES = ("error", "warning", "info")


@dataclass(frozen=True)
class Finding:
    code: str  # stable identifier, e.g. "TRITON_LAYER0_PROBE"
    severity: str  # error | warning | info
    message: str  # what and why, in plain words
    fix: str = ""  # what to change ("" when nothing needs changing)
    engine_message: str = ""  # the target's own text where it would fail ("" when it would not)
    layers: tuple[int, ...] = ()  # global layer ids the finding is about (the map marks them)
    source: str = ""  # file, PR or issue the rule comes from
    stage: str = ""  # when the engine would hit it: "arguments", "start-up", "first forward", ...
    requested_layer: int | None = None  # for layer-index findings: the layer asked for
    valid_layers: tuple[int, ...] | None = None  # ... and the layers the pool really holds
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity {self.severity!r} is not one of {SEVERITIES}")

    @property
    def is_error(self) -> bool:
        return self.severity == "error"

    def to_json(self) -> dict:
        out = {
            "code": self.code,
            "severity": self.severity,
            "message": self.message,
            "fix": self.fix,
            "engine_message": self.engine_message,
            "layers": list(self.layers),
            "source": self.source,
        }
        if self.stage:
            out["stage"] = self.stage
        if self.requested_layer is not None:
            out["requested_layer"] = self.requested_layer
        if self.valid_layers is not None:
            out["valid_layers"] = list(self.valid_layers)
        if self.extra:
            out["extra"] = dict(self.extra)
        return out


def worst(findings) -> str | None:
    """The most severe severity among findings, or None when there are none."""
    present = {f.severity for f in findings}
    return next((s for s in SEVERITIES if s in present), None)
