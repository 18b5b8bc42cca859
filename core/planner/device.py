"""`--device-memory auto`: how much memory the chosen device has, asked of the device probe.

GPUs are asked through `bringup.core.probe.runner` (a child process with a timeout: `torch.xpu` calls can
crash on some Intel systems); the figure is device 0's total, which is what SGLang's mem fraction is
a share of, or for our engine its free memory, which is what the engine sizes its pools from. The CPU figure is the host memory available now (psutil), which is what our engine on
CPU can take.
"""

from __future__ import annotations

from bringup.core.errors import UserError

GPU_KINDS = ("xpu", "cuda")


def host_available_memory() -> int:
    import psutil

    return int(psutil.virtual_memory().available)


def detect_device_memory(device: str = "auto", *, timeout: float = 60.0, free: bool = False) -> tuple[str, int, str]:
    """(device, bytes, how it was found). device 'auto' takes the first GPU found (xpu, cuda), else cpu.
    `free`: a GPU's free memory instead of its total (what our engine sizes from)."""
    device = (device or "auto").lower()
    if device == "cpu":
        return "cpu", host_available_memory(), "host memory available now (psutil)"
    kinds = GPU_KINDS if device == "auto" else (device,)
    if device != "auto" and device not in GPU_KINDS:
        raise UserError(f"cannot measure a {device!r} device; pass --device-memory BYTES (e.g. 64GiB)")
    from bringup.core.probe.runner import run_probe

    steps = ["torch"] + [f"{k}.{part}" for k in kinds for part in ("available", "devices", "memory")]
    report = run_probe(timeout=timeout, steps=steps)
    for kind in kinds:
        info = report.devices.get(kind)
        if info is None or not info.available or not info.devices:
            continue
        first = info.devices[0]
        total, available = first.get("total_memory"), first.get("free_memory")
        name = first.get("name", kind)
        if free and available:
            return kind, int(available), f"{kind}:0 {name}, free memory now (probe)"
        if total:
            how = f"{kind}:0 {name}, total memory (probe)"
            if available is not None:
                how += f"; {available / 2**30:.1f} GiB free now"
            return kind, int(total), how
    if device == "auto":
        return "cpu", host_available_memory(), "no GPU found by the probe; host memory available now (psutil)"
    details = "; ".join(f"{k}: {report.devices[k].detail}" for k in kinds if k in report.devices) or "not found"
    raise UserError(f"the probe found no usable {device} device ({details}); pass --device-memory BYTES or run bringup probe")


def resolve_device_memory(device_memory, device: str = "auto", target: str = "embedded",
                          *, timeout: float = 60.0) -> tuple[str, int, list[str]]:
    """(device, bytes, notes) from what a user gave: memory as bytes / '80GiB' / 'auto', device or 'auto'.

    With memory 'auto' the device is measured (and, if 'auto' too, found). A preset name (h200,
    max1550, b60: core/planner/device_presets.py) gives that device's memory. With a given size and
    device 'auto', SGLang targets plan for cuda and the embedded engine for cpu.
    """
    from .plan import parse_target
    from bringup.core.layermap.sizes import parse_size

    kind, _ = parse_target(target)
    device = (device or "auto").lower()
    if device_memory in (None, "auto"):
        # SGLang's fraction is a share of the total; our engine sizes from what is free at start.
        found, size, how = detect_device_memory(device, timeout=timeout, free=kind == "embedded")
        return found, size, [f"device memory {size / 2**30:.2f} GiB: {how}"]
    from .device_presets import preset

    named = preset(str(device_memory))
    if named is not None:  # a real device by name: its memory per device, and its kind when none was given
        device = named.device if device == "auto" else device
        return device, named.memory_bytes, [f"device memory {named.memory_gib:g} GiB: {named.name} ({named.source})"]
    size = parse_size(device_memory)
    if device == "auto":
        device = "cpu" if kind == "embedded" else "cuda"
    return device, size, []
