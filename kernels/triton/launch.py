"""Launch settings per device: the one place where CUDA and XPU may differ.

The kernels are the same source on both. The warp counts were chosen on an H200; XPU (Intel's
Triton backend, where a warp is a sub-group) uses the same counts until measured on an Intel GPU,
and any XPU tuning belongs here, not in the kernels.
"""

from __future__ import annotations

# Per device type: a multiplier on the CUDA warp count (XPU untuned: 1.0).
_WARP_SCALE = {"cuda": 1.0, "xpu": 1.0}


def num_warps(device_type: str, cuda_warps: int) -> int:
    return max(1, int(cuda_warps * _WARP_SCALE.get(device_type, 1.0)))


def next_pow2(n: int, at_least: int = 1) -> int:
    p = at_least
    while p < n:
        p *= 2
    return p


def interpreted() -> bool:
    """Under Triton's interpreter (TRITON_INTERPRET=1: the kernels run on the CPU, for tests)."""
    import os

    return os.environ.get("TRITON_INTERPRET", "") == "1"


INTERPRETED_COMPUTE_UNITS = 4  # what compute_units says for the CPU under Triton's interpreter


def compute_units(device) -> int:
    """Streaming multiprocessors (CUDA) or Xe cores (XPU): how many programs run at once."""
    import torch

    device = torch.device(device)
    if device.type == "cpu":  # only under TRITON_INTERPRET=1 (debugging on a CPU; tests set more)
        return INTERPRETED_COMPUTE_UNITS
    if device.type == "xpu":
        props = torch.xpu.get_device_properties(device)
        return int(getattr(props, "gpu_subslice_count", 0) or getattr(props, "max_compute_units", 64) // 8 or 8)
    return torch.cuda.get_device_properties(device).multi_processor_count
