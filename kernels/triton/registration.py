"""Registers the fast ops for a GPU device type, each only where it can run.

Called by `bringup.kernels.dispatch.ops_for` the first time it is asked for a "cuda" or "xpu"
op set. Kernel modules (and so triton and fla) are imported only after the checks pass, so a
machine without them keeps the reference, and says why in `skipped`.
"""

from __future__ import annotations

from typing import Callable

from .availability import fla_reason, triton_reason, w8a8_reason

# op name -> (implementation name, module under bringup.kernels, needs fla)
FAST_OPS: dict[str, tuple[str, str, bool]] = {
    "mamba_chunk_scan": ("fla", "fla.mamba_chunk_scan", True),
    "mamba_chunk_scan_varlen": ("fla", "fla.mamba_chunk_scan", True),
    "gated_delta_rule_chunk": ("fla", "fla.gated_delta_rule", True),
    "gated_delta_rule_recurrent_inplace": ("triton", "triton.delta_rule_decode", False),
    "kda_chunk": ("fla", "fla.kda", True),
    "kda_recurrent_inplace": ("triton", "triton.delta_rule_decode", False),
    "delta_rule_gates": ("triton", "triton.delta_rule_gates", False),
    "lightning_attention_chunk": ("fla", "fla.lightning_attention", True),
    "lightning_attention_recurrent_inplace": ("triton", "triton.lightning_attention_decode", False),
    "mamba_state_update": ("triton", "triton.mamba_state_update", False),
    "selective_scan_varlen": ("triton", "triton.selective_scan", False),
    "selective_state_update": ("triton", "triton.selective_scan", False),
    "selective_state_update_lowrank_inplace": ("triton", "triton.selective_scan", False),
    "causal_conv1d_update": ("triton", "triton.causal_conv1d_update", False),
    "short_conv_update_inplace": ("triton", "triton.causal_conv1d_update", False),
    "causal_conv1d_varlen": ("triton", "triton.causal_conv1d_varlen", False),
    "paged_attention_decode": ("triton", "triton.paged_attention_decode", False),
    "paged_attention_prefill": ("sdpa", "sdpa.paged_attention_prefill", False),
    "moe_experts": ("triton", "triton.fused_moe", False),
    "route_sigmoid_grouped": ("triton", "triton.fused_moe", False),
    "route_softmax": ("triton", "triton.route_softmax", False),
    "router_logits": ("triton", "triton.fused_moe", False),
    "moe_gated_experts": ("triton", "triton.fused_moe_gated", False),
    "router_topk_softmax": ("triton", "triton.fused_moe_gated", False),
    "mlp": ("triton", "triton.fused_moe", False),
    "fp8_linear": ("triton", "triton.fp8_linear", False),
    "linear": ("triton", "triton.dense_gemv", False),
    "moe_experts_fp8": ("triton", "triton.fused_moe_fp8", False),
    "moe_experts_shared_fp8_unsummed": ("triton", "triton.fused_moe_fp8", False),
    "add_rms_norm": ("triton", "triton.norms", False),
    "rms_norm": ("triton", "triton.norms", False),
    "act_and_mul": ("triton", "triton.act_and_mul", False),
    "gated_rms_norm": ("triton", "triton.norms", False),
    "qk_norm_rope_kv_write": ("triton", "triton.qk_norm_rope", False),
    "rope_paged_decode": ("triton", "triton.rope_paged_decode", False),
}

# Ops with a W8A8 form for prefill rows where the device has FP8 matrix units (availability.w8a8_reason):
# there it is registered in place of the FAST_OPS entry, under this name; elsewhere the entry runs.
W8A8_NAME = "triton W8A8 prefill, W8A16 decode"
W8A8_FORMS: dict[str, str] = {"fp8_linear": "triton.fp8_w8a8"}

# device type -> {op: why the reference stays}, filled by register_fast_ops (for logs and tests)
skipped: dict[str, dict[str, str]] = {}


def register_fast_ops(device_type: str, register: Callable) -> dict[str, str]:
    """Register every fast op that can run on `device_type` through `register(op, device_type, fn,
    name=...)`; returns {op: implementation name} for those registered."""
    import importlib

    done: dict[str, str] = {}
    skipped[device_type] = {}
    base = __name__.rsplit(".", 2)[0]  # "bringup.kernels"
    for op, (impl_name, module, needs_fla) in FAST_OPS.items():
        reason = fla_reason(device_type) if needs_fla else triton_reason(device_type)
        if reason is None and op in W8A8_FORMS:
            why_not = w8a8_reason(device_type)
            if why_not is None:
                impl_name, module = W8A8_NAME, W8A8_FORMS[op]
            else:  # (recorded beside the ops left to the reference: W8A16 runs, and why)
                skipped[device_type][f"{op} W8A8"] = why_not
        if reason is None:
            try:
                fn = getattr(importlib.import_module(f"{base}.{module}"), op)
            except Exception as exc:  # e.g. a Triton too old for a language feature
                reason = f"{module} does not import: {exc}"
        if reason is not None:
            skipped[device_type][op] = reason
            continue
        register(op, device_type, fn, name=impl_name)
        done[op] = impl_name
    return done


def register_interpreted_ops(dispatch) -> dict[str, str]:
    """Give the CPU the GPUs' op set under Triton's interpreter (TRITON_INTERPRET=1): every fast op
    that needs no flash-linear-attention, in place of the CPU's own (which are set aside, so an op
    the GPU runs as the reference runs it here too). For counting a GPU step's launches on a CPU
    (core/bench/launch_count.py) and for debugging kernels there; returns {op: implementation name}."""
    import importlib
    import os

    if os.environ.get("TRITON_INTERPRET", "") != "1":
        raise RuntimeError("register_interpreted_ops needs TRITON_INTERPRET=1 before triton is imported")
    base = __name__.rsplit(".", 2)[0]
    for op in list(dispatch.REFERENCE_OPS):
        dispatch.unregister(op, "cpu")
    dispatch._FAST_LOADED.add("cpu")  # the CPU's own ops stay out
    done: dict[str, str] = {}
    for op, (impl_name, module, needs_fla) in FAST_OPS.items():
        if needs_fla:
            continue
        dispatch.register(op, "cpu", getattr(importlib.import_module(f"{base}.{module}"), op), name=impl_name)
        done[op] = impl_name
    return done
