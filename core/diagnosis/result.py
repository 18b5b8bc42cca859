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
    reading: object = None  # the general reader's Reading (engine, failure, classes, stage, layers)
    note: str = ""  # what of the log was not read (a size cap) or how it was decoded

    @property
    def ok(self) -> bool:
        """No error found and no failure in the log (a log that failed is never clean)."""
        failed = self.reading is not None and self.reading.failed
        return not failed and not any(f.severity == "error" for f in self.findings)

    def to_json(self) -> dict:
        return {
            "ok": self.ok,
            "lines_read": self.lines_read,
            "model": self.model,
            "facts": dict(self.facts),
            "findings": [f.to_json() for f in self.findings],
            "reading": self.reading.to_json() if self.reading is not None else None,
            "note": self.note,
        }
