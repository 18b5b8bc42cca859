"""What a log diagnosis returns: the findings it recognised in a log, and the facts it read."""

from __future__ import annotations

from dataclasses import dataclass

from bringup.core.finding import Finding


@dataclass
class Diagnosis:
    findings: list[Finding]  # kind "log"
    lines_read: int
    facts: dict  # settings read from the log (device, attention backend, strategy, pool sizes...)
    model: str | None = None  # the model the layer findings were checked against

    @property
    def ok(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)

    def to_json(self) -> dict:
        return {
            "ok": self.ok,
            "lines_read": self.lines_read,
            "model": self.model,
            "facts": dict(self.facts),
            "findings": [f.to_json() for f in self.findings],
        }
