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


W8A8_ENV = "BRINGUP_W8A8"  # 0: W8A16 at every row count (for comparisons); unset or 1: W8A8 where it runs
FP8_MMA_CAPABILITY = (8, 9)  # Ada and Hopper on: tensor cores that multiply e4m3


def w8a8_reason(device_type: str) -> str | None:
    """None when the fp8 linear may run W8A8 for prefill rows (kernels/triton/fp8_w8a8.py) on
    `device_type`: every visible device has FP8 matrix units. Else why W8A16 runs instead."""
    import os

    import torch

    if os.environ.get(W8A8_ENV, "").strip() == "0":
        return f"{W8A8_ENV}=0 asks for W8A16"
    reason = triton_reason(device_type)
    if reason:
        return reason
    if device_type == "xpu":
        # Intel's Triton takes fp8 dots but runs them as fp16 DPAS on its current GPUs
        # (intel/intel-xpu-backend-for-triton #1441, #3801): no fp8 matrix units to gain from.
        return "Intel GPUs: Triton's fp8 dots run as fp16 (no fp8 matrix units known there)"
    if device_type != "cuda":
        return f"no FP8 matrix units known on {device_type}"
    for i in range(torch.cuda.device_count()):
        if torch.cuda.get_device_capability(i) < FP8_MMA_CAPABILITY:
            name = torch.cuda.get_device_name(i)
            return f"{name} (compute capability {'.'.join(map(str, torch.cuda.get_device_capability(i)))}) has no FP8 matrix units"
    return None
