"""Registers the CPU's own versions of some ops (plain torch, tested against the references).

Called by `bringup.kernels.dispatch.ops_for` the first time it is asked for a "cpu" op set. Each
replaces the reference on the CPU only; BRINGUP_KERNELS=reference brings the references back.
"""

from __future__ import annotations

import importlib
from typing import Callable

# op name -> module under bringup.kernels.cpu
CPU_OPS: dict[str, str] = {
    "mamba_state_update_inplace": "mamba_decode",
    "causal_conv1d_update_inplace": "mamba_decode",
    "mamba_chunk_scan_varlen": "mamba_chunk_scan",
    "mlp": "mlp",
    "moe_experts": "moe",
    "paged_attention_decode": "paged_attention_decode",
}
IMPLEMENTATION_NAME = "cpu"


def register_cpu_ops(register: Callable) -> dict[str, str]:
    """Register every CPU op through `register(op, "cpu", fn, name=...)`; returns {op: name}."""
    done = {}
    for op, module in CPU_OPS.items():
        fn = getattr(importlib.import_module(f"{__package__}.{module}"), op)
        register(op, "cpu", fn, name=IMPLEMENTATION_NAME)
        done[op] = IMPLEMENTATION_NAME
    return done
