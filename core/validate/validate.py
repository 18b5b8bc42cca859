"""`validate()`: one launch configuration of one model against a target's rules, with the memory plan of
that very launch when the device's memory is known, and the launch it approves (what Run starts)."""

from __future__ import annotations

from dataclasses import dataclass

from bringup.core.layermap.constraints import map_problems, problem_findings
from bringup.core.layermap.vocabulary import LayerMap
from bringup.core.launch.launch import Launch, launch_for, shell
from bringup.core.launch.model_path import model_path as model_path_of
from bringup.core.rules.embedded import check_embedded
from bringup.core.finding import Finding, worst
from bringup.core.rules.model_facts import facts_for_pp
from bringup.core.rules.settings import LaunchSettings, Resolved
from bringup.core.rules.sglang import check_sglang
from bringup.core.rules.targets import Target, parse_target


@dataclass
class ValidationResult:
    model: str
    target: Target
    settings: LaunchSettings
    resolved: Resolved
    findings: list[Finding]  # in the order the engine would meet them
    launch: Launch  # what Run starts: the command below, plus where to listen
    plan: object | None = None  # the MemoryPlan of this launch, when the device's memory was given

    @property
    def argv(self) -> list[str]:
        return self.launch.argv()

    @property
    def ok(self) -> bool:
        return not any(f.is_error for f in self.findings)

    @property
    def verdict(self) -> str:
        """ok | warning | failure (info findings do not count)."""
        level = worst(f for f in self.findings if f.severity != "info")
        return {"error": "failure", "warning": "warning"}.get(level, "ok")

    @property
    def first_error(self) -> Finding | None:
        """What the engine would stop on first."""
        return next((f for f in self.findings if f.is_error), None)

    @property
    def command(self) -> str:
        return shell(self.argv)

    def to_json(self) -> dict:
        first = self.first_error
        return {
            "ok": self.ok,
            "verdict": self.verdict,
            "model": self.model,
            "target": self.target.to_json(),
            "settings": self.settings.to_json(),
            "resolved": self.resolved.to_json(),
            "findings": [f.to_json() for f in self.findings],
            "first_error": first.code if first else None,
            "command": self.command,
            "argv": list(self.argv),
            "plan": self.plan.to_json() if self.plan is not None else None,
        }


def _launch_findings(target: Target, settings: LaunchSettings) -> list[Finding]:
    """Settings the engine takes that its launch command cannot pass on (`bringup serve` lacks the option)."""
    if target.engine != "embedded":
        return []
    from bringup.core.launch.embedded import flags_missing

    return [Finding.check(
        "EMBEDDED_FLAG_NOT_IN_SERVE", "warning",
        f"The engine takes this setting, but `bringup serve` has no {flag} option yet, so the launch command "
        "leaves it out and the engine's default applies.", fix=f"drop {flag}, or run the engine from Python",
        source="core/cli/serve.py") for flag in flags_missing(settings)]


def validate(layer_map: LayerMap, target: str | Target, settings: LaunchSettings | None = None, *,
             model_path: str | None = None, available_devices: list[str] | None = None,
             device_memory: int | None = None, memory_how: str = "") -> ValidationResult:
    """Predict what `target` does with `settings` for this model, before anything is launched.

    `device_memory` (bytes of one device) adds the memory plan of this very launch: weights that do
    not fit, or pools that hold no request, are errors with the plan's numbers (core/validate/plan_check.py).

    `available_devices` (from the probe, e.g. `ProbeReport.available_devices()`) adds a warning when the
    device is not on this machine; leave it None to validate for another machine."""
    target = parse_target(target) if isinstance(target, str) else target
    settings = settings or LaunchSettings()
    facts = facts_for_pp(layer_map, settings.pp)
    if target.engine == "embedded":
        check = check_embedded(facts, settings)
    elif target.engine == "vllm":
        from bringup.core.rules.vllm import check_vllm

        check = check_vllm(facts, settings, layer_map, target.release)
    else:
        check = check_sglang(facts, settings, target.profile)
    findings = list(target.findings) + check.findings + _launch_findings(target, settings)
    # Sizes the model's modules cannot be built with: the embedded engine refuses them at load (an
    # error); for another engine they are a warning that the config contradicts itself.
    embedded = target.engine == "embedded"
    findings += problem_findings(map_problems(layer_map), severity="error" if embedded else "warning",
                                 engine_words=embedded)
    if available_devices is not None:
        here = "cuda" if settings.device == "rocm" else settings.device
        if here not in available_devices:
            findings.insert(0, Finding.check(
                "DEVICE_NOT_ON_THIS_MACHINE", "warning",
                f"The probe found no {settings.device} device on this machine (it has: {', '.join(available_devices) or 'none'}).",
                fix="validate for another machine, or pick a device the probe lists", source="bringup probe"))
    plan = None
    if device_memory is not None and target.engine == "vllm":
        from bringup.core.validate.vllm_memory import memory_findings

        found, plan = memory_findings(check, layer_map, device_memory, memory_how)
        findings += found
    elif device_memory is not None:
        from bringup.core.validate.plan_check import plan_findings

        found, plan = plan_findings(layer_map, facts, target.label, settings, check.r, device_memory, memory_how)
        findings += found
    launch = launch_for(target, model_path or model_path_of(layer_map), settings)
    return ValidationResult(layer_map.name, target, settings, check.r, findings, launch, plan)
