"""Which implementation of each kernel op runs on a device.

`ops_for(device)` returns a namespace with one function per op. The plain-torch reference is the
base layer everywhere; a faster implementation registered for a device type (with
`register(op, device_type, fn, name=...)`, e.g. a Triton paged attention for "cuda" and "xpu", or
flash-linear-attention's chunked scan) replaces the reference for that op on that device.
The CPU has a few versions of its own (kernels/cpu/: plain torch in fewer ops, oneDNN products for
many rows, torch's SDPA for attention), registered the same way. `BRINGUP_KERNELS=reference`
forces the reference everywhere (to bisect a wrong answer).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Callable

from .reference import OPS as REFERENCE_OPS

ENV_VAR = "BRINGUP_KERNELS"
KNOWN_CHOICES = ("reference", "auto")


@dataclass(frozen=True)
class Impl:
    op: str
    device_type: str
    fn: Callable
    name: str  # e.g. "triton", "fla"


_REGISTRY: dict[tuple[str, str], Impl] = {}


def register(op: str, device_type: str, fn: Callable, *, name: str) -> None:
    """Make `fn` the implementation of `op` on devices of `device_type` ("cuda", "xpu", "cpu")."""
    if op not in REFERENCE_OPS:
        raise ValueError(f"unknown kernel op {op!r}; known ops: {sorted(REFERENCE_OPS)}")
    _REGISTRY[(op, device_type)] = Impl(op, device_type, fn, name)


def unregister(op: str, device_type: str) -> None:
    _REGISTRY.pop((op, device_type), None)


def device_type_of(device) -> str:
    """"cpu", "cuda", "xpu"... for a torch.device, a string like "cuda:1", or None (the current accelerator)."""
    import torch

    if device is None:
        acc = torch.accelerator.current_accelerator() if hasattr(torch, "accelerator") else None
        return acc.type if acc is not None else "cpu"
    return torch.device(device).type


def kernel_choice() -> str:
    choice = os.environ.get(ENV_VAR, "auto").strip().lower() or "auto"
    if choice not in KNOWN_CHOICES:
        raise ValueError(f"{ENV_VAR}={choice!r} is not a kernel choice; use one of {', '.join(KNOWN_CHOICES)}")
    return choice


_FAST_LOADED: set[str] = set()


def _load_fast_ops(device_type: str) -> None:
    """Once per device type: register the Triton / flash-linear-attention ops that can run on a GPU
    (kernels/triton/registration.py), or the CPU's own (kernels/cpu/registration.py). Imported lazily
    so CPU machines never import triton or fla; a version registered explicitly before this keeps
    its place."""
    if device_type in _FAST_LOADED or device_type not in ("cuda", "xpu", "cpu"):
        return
    _FAST_LOADED.add(device_type)

    def keep_existing(op, dev, fn, *, name):
        if (op, dev) not in _REGISTRY:
            register(op, dev, fn, name=name)

    if device_type == "cpu":
        from .cpu.registration import register_cpu_ops

        register_cpu_ops(keep_existing)
        return
    from .triton.registration import register_fast_ops

    register_fast_ops(device_type, keep_existing)


def ops_for(device=None) -> SimpleNamespace:
    """The op set for `device`: registered fast versions where present, the reference elsewhere.

    The namespace also carries `implementations` ({op: "reference" | name}) for logs and /server_info.
    """
    dtype = device_type_of(device)
    use_fast = kernel_choice() != "reference"
    if use_fast:
        _load_fast_ops(dtype)
    chosen: dict[str, Callable] = {}
    names: dict[str, str] = {}
    for op, ref in REFERENCE_OPS.items():
        impl = _REGISTRY.get((op, dtype)) if use_fast else None
        chosen[op] = impl.fn if impl else ref
        names[op] = impl.name if impl else "reference"
    if names["mamba_chunk_scan_varlen"] == "reference" and names["mamba_chunk_scan"] != "reference":
        # A fast one-sequence scan beats the reference varlen scan even called once per prompt.
        from .reference.varlen import scan_each_sequence

        chosen["mamba_chunk_scan_varlen"] = scan_each_sequence(chosen["mamba_chunk_scan"])
        names["mamba_chunk_scan_varlen"] = f"{names['mamba_chunk_scan']} per sequence"
    for op in REFERENCE_OPS:
        inplace = f"{op}_inplace"
        if inplace in REFERENCE_OPS and names[op] != "reference" and names[inplace] == "reference":
            # A fast op's in-place form lives in its module: it updates pool slots where they lie,
            # where the reference in-place form gathers and scatters.
            fn = getattr(sys.modules.get(getattr(chosen[op], "__module__", ""), None), inplace, None)
            if fn is not None:
                chosen[inplace], names[inplace] = fn, names[op]
    extras = {}
    if names["moe_gated_experts"] != "reference":  # the same for the gated MoE (gpt-oss, Qwen3-MoE)
        module = sys.modules.get(getattr(chosen["moe_gated_experts"], "__module__", ""), None)
        fn = getattr(module, "moe_gated_experts_unsummed", None)
        if fn is not None:
            extras["moe_gated_experts_unsummed"] = fn
        forms = getattr(module, "DECODE_FORMS", None)  # its decode forms, timed per decode-graph batch size
        if forms is not None:
            extras["moe_gated_decode_forms"] = forms
    if names["moe_experts"] != "reference":
        # A fused MoE may leave the sum over k to the model's next residual add (one kernel less).
        module = sys.modules.get(getattr(chosen["moe_experts"], "__module__", ""), None)
        # (the last two: the shared expert too, summed with the routed ones or in parts)
        for extra in ("moe_experts_unsummed", "moe_experts_shared", "moe_experts_shared_unsummed"):
            fn = getattr(module, extra, None)
            if fn is not None:
                extras[extra] = fn
    return SimpleNamespace(**chosen, **extras, implementations=names, device_type=dtype)
