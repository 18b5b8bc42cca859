"""Advice for a launch whose weights do not fit one device: the smallest tensor- or pipeline-parallel
size that the target's own rules accept and the memory plan fits. No Qt here.

Each candidate is checked by `bringup.core.validate.validate` with the device's memory, so the
divisibility rules (attention, KV and Mamba heads over TP; layers over PP) and the plan are the
target's own, not a rule of thumb. The embedded engine runs on one device: its advice names the
newest SGLang, which shards.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_WAYS = 16  # beyond one node's devices, the advice would not be a launch anyone runs


@dataclass(frozen=True)
class FitAdvice:
    target: str  # the target the advice is for (the newest SGLang for the embedded engine)
    tp: int | None  # the smallest TP that fits (PP 1), None if none up to MAX_WAYS does
    pp: int | None  # the smallest PP that fits (TP 1), ditto

    def text(self, device_label: str = "device") -> str:
        ways = []
        if self.tp:
            ways.append(f"--tp {self.tp} ({self.tp} \u00d7 {device_label})")
        if self.pp:
            ways.append(f"--pp {self.pp} ({self.pp} \u00d7 {device_label})")
        if not ways:
            return (f"No TP or PP up to {MAX_WAYS} fits {self.target} on this device: use a device with more memory "
                    "or smaller weights (a quantized checkpoint).")
        return f"Smallest that fits with {self.target}'s rules: " + ", or ".join(ways) + "."


def smallest_fit(layer_map, target: str, settings, device_memory: int) -> FitAdvice:
    """`settings`: the LaunchSettings being planned; TP and PP are varied one at a time."""
    from bringup.core.validate.validate import validate

    if target == "embedded":
        from bringup.core.rules.targets import known_targets

        target = [t for t in known_targets() if t.startswith("sglang")][-1]

    def first(field: str) -> int | None:
        for ways in range(2, MAX_WAYS + 1):
            changed = settings.with_(tp=1, pp=1).with_(**{field: ways})
            try:
                result = validate(layer_map, target, changed, device_memory=device_memory)
            except Exception:  # noqa: BLE001 (a candidate the rules refuse outright is simply not advice)
                continue
            if result.ok:
                return ways
        return None

    return FitAdvice(target, first("tp"), first("pp"))
