"""The compatibility matrix of one model on one target: every device x mamba strategy x attention
backend, each cell the verdict of a full validation (ok / warning / failure) and why."""

from __future__ import annotations

from dataclasses import dataclass, field

from bringup.core.layermap.vocabulary import LayerMap
from bringup.core.engine import facts as engine_facts
from bringup.core.rules.settings import LaunchSettings
from bringup.core.rules.sglang_backends import BACKENDS
from bringup.core.rules.targets import Target, parse_target
from bringup.core.validate.validate import validate

# "disabled" is --disable-radix-cache (the strategy then does not matter). An explicit no_buffer cell
# also passes --disable-overlap-schedule, the flag no_buffer asserts on (otherwise every such cell fails
# on the same flag and hides what else matters).
STRATEGIES = ("auto", "no_buffer", "extra_buffer", "extra_buffer_lazy", "disabled")
STRATEGY_FLAGS = {
    "auto": [], "no_buffer": ["--mamba-radix-cache-strategy", "no_buffer", "--disable-overlap-schedule"],
    "extra_buffer": ["--mamba-radix-cache-strategy", "extra_buffer"],
    "extra_buffer_lazy": ["--mamba-radix-cache-strategy", "extra_buffer_lazy"], "disabled": ["--disable-radix-cache"],
}
DEFAULT = "default"  # the column where no --attention-backend is given


@dataclass
class Cell:
    device: str
    strategy: str
    backend: str
    verdict: str  # ok | warning | failure
    resolved_backend: str | None
    resolved_strategy: str | None
    codes: list[str] = field(default_factory=list)  # error and warning codes, engine order
    summary: str = ""  # the first error (or warning): the engine's text if it has one, else ours
    settings: dict = field(default_factory=dict)  # the LaunchSettings fields this cell sets

    def to_json(self) -> dict:
        return {"device": self.device, "strategy": self.strategy, "backend": self.backend, "verdict": self.verdict,
                "resolved_backend": self.resolved_backend, "resolved_strategy": self.resolved_strategy,
                "codes": self.codes, "summary": self.summary, "settings": self.settings}


@dataclass
class Matrix:
    model: str
    target: Target
    devices: list[str]
    strategies: list[str]
    backends: dict[str, list[str]]  # per device, DEFAULT first
    cells: list[Cell]

    def cell(self, device: str, strategy: str, backend: str) -> Cell:
        for c in self.cells:
            if (c.device, c.strategy, c.backend) == (device, strategy, backend):
                return c
        raise KeyError((device, strategy, backend))

    def counts(self) -> dict[str, int]:
        out = {"ok": 0, "warning": 0, "failure": 0}
        for c in self.cells:
            out[c.verdict] += 1
        return out

    def to_json(self) -> dict:
        return {"model": self.model, "target": self.target.to_json(), "devices": self.devices,
                "strategies": self.strategies,
                "strategy_flags": {k: STRATEGY_FLAGS[k] for k in self.strategies}, "backends": self.backends, "counts": self.counts(),
                "cells": [c.to_json() for c in self.cells]}


def compatibility_matrix(layer_map: LayerMap, target: str | Target, base: LaunchSettings | None = None, *,
                         devices: list[str] | None = None) -> Matrix:
    """`base` carries the other settings (page size, TP, PP, dtypes...) into every cell."""
    target = parse_target(target) if isinstance(target, str) else target
    base = base or LaunchSettings()
    if target.engine == "embedded":
        devices = list(devices or engine_facts.DEVICES)
        strategies, per_device = ["auto"], {d: [DEFAULT] for d in devices}
    else:
        devices = list(devices or BACKENDS)
        strategies = list(STRATEGIES)
        per_device = {d: [DEFAULT, *BACKENDS[d]] for d in devices}
    cells = []
    for device in devices:
        for strategy in strategies:
            for backend in per_device[device]:
                varied = {
                    "device": device,
                    "attention_backend": None if backend == DEFAULT else backend,
                    "mamba_strategy": "auto" if strategy == "disabled" else strategy,
                    "disable_radix_cache": strategy == "disabled",
                    "disable_overlap_schedule": base.disable_overlap_schedule or strategy == "no_buffer",
                }
                settings = base.with_(**varied)
                result = validate(layer_map, target, settings)
                serious = [f for f in result.findings if f.severity in ("error", "warning")
                           and not f.code.startswith("TARGET_")]
                first = next((f for f in serious if f.is_error), serious[0] if serious else None)
                verdict = ("failure" if any(f.is_error for f in serious) else "warning" if serious else "ok")
                cells.append(Cell(device, strategy, backend, verdict, result.resolved.attention_backend,
                                  result.resolved.mamba_strategy, [f.code for f in serious],
                                  (first.engine_message or first.message) if first else "", varied))
    return Matrix(layer_map.name, target, devices, strategies, per_device, cells)
