"""A finding: one thing the workbench found, said for people (what and why, what to change), with the
layers the map should mark. One class for all three producers:

- a check predicts it (the launch rules in core/rules/, the device probe in core/probe/):
  `Finding.check(code, severity, explanation, fix=..., engine_message=..., stage=...)`;
- a log shows it (the diagnosis in core/diagnosis/): `kind="log"`, with a title, the lines it was
  seen on and the line that matched.

`to_json()` keeps each producer's `--json` shape (DESIGN.md): a check's text is its "message", next
to the engine's own words; a log finding has "title", "explanation" and its lines.
"""

from __future__ import annotations

from dataclasses import dataclass, field

SEVERITIES = ("error", "warning", "info")  # worst first
KINDS = ("check", "log")


@dataclass(frozen=True)
class LayerInfo:
    """What a layer named by a finding is, in the model at hand."""

    index: int
    mixer: str
    ffn: str

    def to_json(self) -> dict:
        return {"index": self.index, "mixer": self.mixer, "ffn": self.ffn}


@dataclass(frozen=True)
class Finding:
    code: str  # stable identifier, e.g. "TRITON_LAYER0_PROBE", "LAYER_NOT_IN_KV_POOL"
    severity: str  # error | warning | info
    title: str = ""  # one line (log findings; a check's explanation says it all)
    explanation: str = ""  # what happened or would happen, and why, in plain words
    fix: str = ""  # what to change ("" when nothing needs changing)
    layers: tuple[int, ...] = ()  # global layer ids the map should mark (the requested one first)
    source: str = ""  # file, PR or issue behind it
    kind: str = "check"  # check (a rule or the probe predicts it) | log (a log shows it)
    # a check's prediction
    engine_message: str = ""  # the target's own text where it would fail
    stage: str = ""  # when the engine would hit it: "arguments", "start-up", "first forward", ...
    # layer-index findings
    requested_layer: int | None = None  # the layer asked for
    valid_layers: tuple[int, ...] | None = None  # ... and the layers the pool really holds
    requested: LayerInfo | None = None  # with a model: what the requested layer is
    valid: tuple[LayerInfo, ...] = ()  # with a model: what the valid layers are
    # where a log shows it
    lines: tuple[int, ...] = ()  # 1-based line numbers (the first is where it matched)
    matched: str = ""  # the log line that matched
    engine: str = ""  # whose message it is: sglang | bringup | torch | transformers | triton | system
    details: dict = field(default_factory=dict, compare=False, hash=False)  # numbers read from the message

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity {self.severity!r} is not one of {SEVERITIES}")
        if self.kind not in KINDS:
            raise ValueError(f"kind {self.kind!r} is not one of {KINDS}")

    @classmethod
    def check(cls, code: str, severity: str, explanation: str, **kw) -> "Finding":
        """A finding a rule or the probe predicts."""
        return cls(code, severity, explanation=explanation, **kw)

    @property
    def message(self) -> str:
        """Title and explanation together (the wording findings lists use)."""
        return f"{self.title}: {self.explanation}" if self.title and self.explanation else self.title or self.explanation

    @property
    def is_error(self) -> bool:
        return self.severity == "error"

    def to_json(self) -> dict:
        out = {"code": self.code, "severity": self.severity}
        if self.kind == "log":
            out.update(title=self.title, explanation=self.explanation, fix=self.fix, lines=list(self.lines),
                       matched=self.matched, engine=self.engine, source=self.source, layers=list(self.layers))
        else:
            out.update(message=self.message, fix=self.fix, engine_message=self.engine_message, layers=list(self.layers),
                       source=self.source)
            if self.stage:
                out["stage"] = self.stage
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


def severity_rank(severity: str | None) -> int:
    """0 for the worst; unknown severities after the known ones."""
    return SEVERITIES.index(severity) if severity in SEVERITIES else len(SEVERITIES)


def worst(findings) -> str | None:
    """The most severe severity among findings, or None when there are none."""
    present = {f.severity for f in findings}
    return next((s for s in SEVERITIES if s in present), None)
