"""Device selection and memory queries through torch's own device APIs (cpu, cuda, xpu, ...).

intel-extension-for-pytorch is imported only when it is installed and the device is XPU: upstream
torch carries XPU support itself, the extension only adds optimisations.
"""

from __future__ import annotations

import importlib.util

import torch

from bringup.core.errors import UserError

GB = 1024**3


def _backend(kind: str):
    return getattr(torch, kind, None)


def resolve_device(spec: str | torch.device | None) -> torch.device:
    """`cpu`, `cuda`, `xpu`, `cuda:1`, or `auto` (the current accelerator if any, else cpu)."""
    text = str(spec or "auto").strip().lower()
    if text == "auto":
        acc = getattr(torch, "accelerator", None)
        if acc is not None and acc.is_available():
            return torch.device(acc.current_accelerator().type)
        return torch.device("cpu")
    try:
        device = torch.device(text)
    except RuntimeError:
        raise UserError(f"unknown device {spec!r}; use cpu, cuda, xpu, cuda:1 or auto") from None
    if device.type == "cpu":
        return device
    backend = _backend(device.type)
    if backend is None or not hasattr(backend, "is_available") or not backend.is_available():
        raise UserError(
            f"device {text!r} is not available with this torch build ({torch.__version__}); "
            "install a torch build for that device or use --device cpu"
        )
    if device.index is not None and device.index >= backend.device_count():
        raise UserError(f"device {text!r} does not exist: this machine has {backend.device_count()} {device.type} device(s)")
    if device.type == "xpu" and importlib.util.find_spec("intel_extension_for_pytorch") is not None:
        from importlib.metadata import version

        from bringup.core.probe.ipex_compat import ipex_mismatch

        mismatch = ipex_mismatch(version("intel-extension-for-pytorch"), torch.__version__)
        if mismatch:  # a stale IPEX must not stop an engine that does not need it
            import logging

            logging.getLogger("bringup.engine").warning("not loading IPEX: %s", mismatch)
        else:
            import intel_extension_for_pytorch  # noqa: F401  (optional optimisations for XPU)
    return device


def set_current(device: torch.device) -> None:
    backend = _backend(device.type)
    if device.type != "cpu" and device.index is not None and hasattr(backend, "set_device"):
        backend.set_device(device.index)


def free_memory(device: torch.device) -> int:
    """Bytes free now: the device's own count on accelerators, available host memory on cpu."""
    if device.type == "cpu":
        import psutil

        return int(psutil.virtual_memory().available)
    backend = _backend(device.type)
    if hasattr(backend, "mem_get_info"):
        free, _total = backend.mem_get_info(device)
        return int(free)
    # Older XPU builds: total memory less what this process's allocator holds.
    return int(backend.get_device_properties(device).total_memory - backend.memory_reserved(device))


def synchronize(device: torch.device) -> None:
    if device.type != "cpu":
        _backend(device.type).synchronize(device)


def empty_cache(device: torch.device) -> None:
    if device.type != "cpu" and hasattr(_backend(device.type), "empty_cache"):
        _backend(device.type).empty_cache()


def device_name(device: torch.device) -> str:
    if device.type == "cpu":
        import platform

        return platform.processor() or platform.machine() or "cpu"
    if device.type == "xpu":
        # get_device_name / get_device_properties can segfault on some XPU drivers (pytorch#179891),
        # which no try/except catches; a name is cosmetic, so XPU goes without one.
        return str(device)
    try:
        return str(_backend(device.type).get_device_name(device))
    except Exception:  # noqa: BLE001 - a name is cosmetic
        return str(device)
