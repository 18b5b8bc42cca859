"""Can the fast kernels run on a device type? Each check returns None (yes) or the reason why not.

Imports happen inside the functions: this module is safe to import where Triton is absent.
"""

from __future__ import annotations

import importlib.util

GPU_DEVICE_TYPES = ("cuda", "xpu")


def _device_reason(device_type: str) -> str | None:
    import torch

    if device_type not in GPU_DEVICE_TYPES:
        return f"the Triton kernels run on {' and '.join(GPU_DEVICE_TYPES)}, not {device_type}"
    backend = getattr(torch, device_type, None)
    if backend is None or not backend.is_available():
        return f"no {device_type} device is available to torch"
    return None


def triton_reason(device_type: str) -> str | None:
    """None when Triton kernels can run on `device_type`, else why not."""
    reason = _device_reason(device_type)
    if reason:
        return reason
    if importlib.util.find_spec("triton") is None:
        return "triton is not installed"
    try:
        import triton  # noqa: F401
    except Exception as exc:  # a broken install must fall back to the reference, not crash start-up
        return f"triton does not import: {exc}"
    return None


def fla_reason(device_type: str) -> str | None:
    """None when flash-linear-attention's chunked kernels can run on `device_type`, else why not."""
    reason = triton_reason(device_type)
    if reason:
        return reason
    if importlib.util.find_spec("fla") is None:
        return "flash-linear-attention (fla) is not installed; pip install 'bringup-workbench[fla]'"
    try:
        from fla.ops.simple_gla import chunk_simple_gla  # noqa: F401
    except Exception as exc:
        return f"flash-linear-attention does not import: {exc}"
    return None
