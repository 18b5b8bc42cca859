"""What a log diagnosis finds: one failure (or warning) recognised in a log, said for people."""

from __future__ import annotations

from dataclasses import dataclass, field

SEVERITIES = ("error", "warning", "info")


@dataclass(frozen=True)
class LayerInfo:
    index: int
    mixer: str
    ffn: str

    def to_json(self) -> dict:
        return {"index": self.index, "mixer": self.mixer, "ffn": self.ffn}


@dataclass(frozen=True)
class DiagnosisFinding:
    code: str  # stable identifier, e.g. "LAYER_NOT_IN_KV_POOL"
    severity: str  # error | warning | info
    title: str  # one line
    explanation: str  # what happened and why, in plain words
    fix: str  # what to change
    lines: tuple[int, ...]  # 1-based line numbers where it was seen (the first is where it matched)
    matched: str  # the log line that matched
    engine: str = ""  # whose message it is: sglang | bringup | torch | transformers | triton | system
    source: str = ""  # PR, issue or file behind the explanation
    layers: tuple[int, ...] = ()  # layers the map should mark (the requested one first)
    requested_layer: int | None = None  # layer-index findings: the layer asked for
    valid_layers: tuple[int, ...] | None = None  # ... and the layers the pool holds
    requested: LayerInfo | None = None  # with a model: what the requested layer is
    valid: tuple[LayerInfo, ...] = ()  # with a model: what the valid layers are
    details: dict = field(default_factory=dict, compare=False, hash=False)  # numbers read from the message

    @property
    def message(self) -> str:
        """Title and explanation together (the wording other findings lists use)."""
        return f"{self.title}: {self.explanation}"

    def to_json(self) -> dict:
        out = {
            "code": self.code,
            "severity": self.severity,
            "title": self.title,
            "explanation": self.explanation,
            "fix": self.fix,
            "lines": list(self.lines),
            "matched": self.matched,
            "engine": self.engine,
            "source": self.source,
            "layers": list(self.layers),
        }
        if self.requested_layer is not None:
            out["requested_layer"] = self.requested_layer
        if self.valid_layers is not None:
            out["valid_layers"] = list(self.valid_layers)
        if self.requested is not None:
            out["requested"] = self.requested.to_json()
            out["valid"] = [v.to_json() for v in self.valid]
        if self.details:
            out["details"] = dict(self.details)
        return out


@dataclass
class Diagnosis:
    findings: list[DiagnosisFinding]
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
