"""Registers the CPU's own versions of some ops (plain torch, tested against the references), all
under the name "cpu".

Called by `bringup.kernels.dispatch.ops_for` the first time it is asked for a "cpu" op set. Each
replaces the reference on the CPU only; BRINGUP_KERNELS=reference brings the references back.
"""

from __future__ import annotations

import importlib
from typing import Callable

# op name -> module, relative to bringup.kernels.cpu ("..sdpa.x" is bringup.kernels.sdpa.x: torch's
# fused attention serves the CPU's prompts as it serves the GPUs', about 4x faster than the
# reference for a prompt riding with seven decodes, 1.6x for eight prompts)
CPU_OPS: dict[str, str] = {
    "mamba_state_update_inplace": "mamba_decode",
    "causal_conv1d_update_inplace": "mamba_decode",
    "mamba_chunk_scan_varlen": "mamba_chunk_scan",
    "mlp": "mlp",
    "moe_experts": "moe",
    "paged_attention_decode": "paged_attention_decode",
    "kv_cache_write": "kv_cache_write",
    "paged_attention_prefill": "..sdpa.paged_attention_prefill",
}
IMPLEMENTATION_NAME = "cpu"


def register_cpu_ops(register: Callable) -> dict[str, str]:
    """Register every CPU op through `register(op, "cpu", fn, name=...)`; returns {op: name}."""
    done = {}
    for op, module in CPU_OPS.items():
        fn = getattr(importlib.import_module(module if module.startswith("..") else f".{module}", __package__), op)
        register(op, "cpu", fn, name=IMPLEMENTATION_NAME)
        done[op] = IMPLEMENTATION_NAME
    return done
