"""The state one validation run passes between rule modules: the model, the settings, the settings as
resolved so far, the target's profile and the findings collected in the engine's own order."""

from __future__ import annotations

from dataclasses import dataclass, field

from bringup.core.finding import Finding
from bringup.core.rules.model_facts import ModelFacts
from bringup.core.rules.profiles import SglangProfile
from bringup.core.rules.settings import LaunchSettings, Resolved


@dataclass
class Check:
    m: ModelFacts
    s: LaunchSettings
    r: Resolved
    profile: SglangProfile | None = None
    findings: list[Finding] = field(default_factory=list)
    derived: dict = field(default_factory=dict)  # figures a later step reads (vLLM's page bytes for its memory check)

    def add(self, code: str, severity: str, message: str, **kw) -> Finding:
        finding = Finding.check(code, severity, message, **kw)
        self.findings.append(finding)
        return finding

    @property
    def version(self) -> str:
        return f"sglang {self.profile.label}" if self.profile else "the embedded engine"

    def has(self, code: str) -> bool:
        return any(f.code == code for f in self.findings)
