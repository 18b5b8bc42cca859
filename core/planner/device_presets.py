"""Real devices' memory, per device as the engine sees it (one torch device = one TP rank), with the
source of each figure. The Plan tab's preset list and `--device-memory NAME` read them.

A card can be several devices: an Intel Data Center GPU Max 1550 has two 64 GB stacks, and in
the driver's default FLAT hierarchy each stack is its own torch.xpu device, so a launch plans for
64 GB, not 128 (COMPOSITE mode, ZE_FLAT_DEVICE_HIERARCHY=COMPOSITE, joins them into one device).
"""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1024**3


@dataclass(frozen=True)
class DevicePreset:
    key: str  # what --device-memory accepts (e.g. "max1550")
    name: str
    device: str  # cuda | xpu | cpu (ROCm builds are cuda to torch)
    memory_gib: float  # one device, as torch reports its total (GiB)
    per_card: int  # devices one card shows to torch
    source: str

    @property
    def memory_bytes(self) -> int:
        return int(self.memory_gib * GIB)

    @property
    def label(self) -> str:
        per = f" \u00b7 {self.per_card} devices per card" if self.per_card > 1 else ""
        return f"{self.name} \u00b7 {self.memory_gib:g} GiB{per}"


PRESETS: tuple[DevicePreset, ...] = (
    DevicePreset("b60", "Intel Arc Pro B60", "xpu", 24.0, 1,
                 "Intel Arc Pro B60 product brief: 24 GB GDDR6 (one Xe2 GPU, one device)"),
    DevicePreset("b580", "Intel Arc B580", "xpu", 12.0, 1, "Intel Arc B580 specifications: 12 GB GDDR6"),
    DevicePreset("max1100", "Intel Data Center GPU Max 1100", "xpu", 48.0, 1,
                 "Intel Data Center GPU Max 1100 specifications: 48 GB HBM2e, one stack"),
    DevicePreset("max1550", "Intel Data Center GPU Max 1550 (one stack, FLAT mode)", "xpu", 64.0, 2,
                 "Intel Data Center GPU Max 1550: 128 GB HBM2e on two stacks; Level Zero's default FLAT device "
                 "hierarchy exposes each 64 GB stack as its own device (Intel GPU driver docs, "
                 "ZE_FLAT_DEVICE_HIERARCHY)"),
    DevicePreset("a100", "NVIDIA A100 80GB", "cuda", 80.0, 1, "nvidia-smi memory.total 81,920 MiB (A100 80GB SXM/PCIe)"),
    DevicePreset("h100", "NVIDIA H100 80GB", "cuda", 79.6, 1, "nvidia-smi memory.total 81,559 MiB (H100 SXM5 80GB)"),
    DevicePreset("h200", "NVIDIA H200", "cuda", 139.8, 1, "nvidia-smi memory.total 143,771 MiB (H200 SXM 141 GB)"),
    DevicePreset("b200", "NVIDIA B200", "cuda", 179.1, 1,
                 "NVIDIA DGX B200: 1,440 GB HBM3e over 8 GPUs; nvidia-smi memory.total 183,359 MiB per GPU"),
    DevicePreset("mi300x", "AMD Instinct MI300X", "cuda", 192.0, 1,
                 "AMD Instinct MI300X data sheet: 192 GB HBM3 (a ROCm build of torch calls it cuda)"),
    DevicePreset("cpu64", "CPU with 64 GiB of RAM", "cpu", 64.0, 1, "a host figure to plan the embedded engine on CPU"),
)

BY_KEY = {p.key: p for p in PRESETS}


def preset(key: str) -> DevicePreset | None:
    """The preset named `key` (case and punctuation ignored: "Max-1550", "h200"), or None."""
    return BY_KEY.get("".join(ch for ch in (key or "").lower() if ch.isalnum()))
