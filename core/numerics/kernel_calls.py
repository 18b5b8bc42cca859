"""Record the kernel calls the engine really makes for a model, then replay each against the reference.

The engine's op namespace (`kernels.dispatch.ops_for`) is shared by every module of a model, so
wrapping its functions sees every call with the model's real shapes and dtypes: one short prompt
and one decode step cover prefill and decode kernels. The first call of each op is kept, its
tensors copied to the CPU; `replay` runs it through the device's implementation (in the model's
dtype) and through the plain reference (float32, CPU), and compares what each returned and, for
the in-place ops (pools), the tensors it wrote.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

# Error allowed, relative to the output's largest magnitude, by the dtype the kernel ran in.
TOLERANCES = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 3e-2}


@dataclass
class KernelCall:
    op: str
    implementation: str
    args: tuple
    kwargs: dict


def _map(value, fn):
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_map(v, fn) for v in value)
    if isinstance(value, dict):
        return {k: _map(v, fn) for k, v in value.items()}
    return value


def _tensors(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    return []


def record_calls(ops, ops_used: set[str] | None = None) -> tuple[list[KernelCall], callable]:
    """Wrap `ops`' functions; returns the list the first call of each op goes into and an undo."""
    calls: list[KernelCall] = []
    seen: set[str] = set()
    originals = {}
    for op, impl in ops.implementations.items():
        fn = getattr(ops, op)
        originals[op] = fn

        def wrapper(*args, _op=op, _fn=fn, _impl=impl, **kwargs):
            if _op not in seen:  # copied before the call: in-place ops overwrite their inputs
                seen.add(_op)
                calls.append(KernelCall(_op, _impl, _map(args, lambda t: t.detach().cpu().clone()),
                                        _map(kwargs, lambda t: t.detach().cpu().clone())))
            return _fn(*args, **kwargs)

        setattr(ops, op, wrapper)
    unsummed = getattr(ops, "moe_experts_unsummed", None)
    if unsummed is not None:
        # A fused MoE's unsummed form (the model sums over k in its next residual add) takes
        # moe_experts' arguments: recorded as moe_experts, so the check replays the summed op.
        originals["moe_experts_unsummed"] = unsummed

        def unsummed_wrapper(*args, **kwargs):
            if "moe_experts" not in seen:
                seen.add("moe_experts")
                calls.append(KernelCall("moe_experts", ops.implementations["moe_experts"],
                                        _map(args, lambda t: t.detach().cpu().clone()),
                                        _map(kwargs, lambda t: t.detach().cpu().clone())))
            return unsummed(*args, **kwargs)

        ops.moe_experts_unsummed = unsummed_wrapper
    with_shared = getattr(ops, "moe_experts_shared_unsummed", None)
    if with_shared is not None:
        # The shared expert and the routed ones in one fused call: recorded as the two calls it
        # replaces (moe_experts and mlp, with their own arguments), so the check replays those.
        originals["moe_experts_shared_unsummed"] = with_shared

        def with_shared_wrapper(x, weights, ids, up, down, shared_up, shared_down, act="relu2"):
            for op, args in (("moe_experts", (x, weights, ids, up, down, None, act)),
                             ("mlp", (x, shared_up, shared_down, None, act))):
                if op not in seen and op in ops.implementations:
                    seen.add(op)
                    calls.append(KernelCall(op, ops.implementations[op], _map(args, lambda t: t.detach().cpu().clone()), {}))
            return with_shared(x, weights, ids, up, down, shared_up, shared_down, act)

        ops.moe_experts_shared_unsummed = with_shared_wrapper

    def undo():
        for op, fn in originals.items():
            setattr(ops, op, fn)

    return calls, undo


def _floating_to(t: torch.Tensor, device, dtype=None) -> torch.Tensor:
    # Always a copy (`to` on the same device and dtype is not): an in-place op must not change the record.
    return t.to(device=device, dtype=dtype if dtype is not None and t.is_floating_point() else t.dtype, copy=True)


def _sync(device) -> None:
    from bringup.core.engine import device as devices

    devices.synchronize(torch.device(device))


def _run(fn, args, kwargs, device, dtype=None):
    fn(*_map(args, lambda t: _floating_to(t, device, dtype)), **_map(kwargs, lambda t: _floating_to(t, device, dtype)))
    a = _map(args, lambda t: _floating_to(t, device, dtype))
    k = _map(kwargs, lambda t: _floating_to(t, device, dtype))
    _sync(device)
    started = time.perf_counter()
    out = fn(*a, **k)
    _sync(device)
    ms = (time.perf_counter() - started) * 1000
    # What it produced: its return value and every tensor argument (in-place ops write into them).
    # (the call above warmed it up: compilation and first-touch are not the kernel's time)
    produced = [t.detach().float().cpu() for t in _tensors(out) + _tensors(a) + _tensors(k)]
    return produced, ms


def _model_dtype(call: KernelCall) -> torch.dtype:
    """The least precise floating dtype among its inputs (a bfloat16 x with a float32 state pool is a bfloat16 call)."""
    floats = {t.dtype for t in _tensors(call.args) + _tensors(call.kwargs) if t.is_floating_point()}
    return next((d for d in (torch.bfloat16, torch.float16) if d in floats), torch.float32)


def shape_of(call: KernelCall) -> list[int]:
    tensors = _tensors(call.args)
    return list(tensors[0].shape) if tensors else []


def replay(call: KernelCall, device_fn, reference_fn, device) -> dict:
    """Device implementation (the recorded dtype) against the reference (float32 on the CPU)."""
    dtype = _model_dtype(call)
    got, ms = _run(device_fn, call.args, call.kwargs, device)
    want, ref_ms = _run(reference_fn, call.args, call.kwargs, "cpu", torch.float32)
    max_abs, scale = 0.0, 0.0
    for g, w in zip(got, want):
        if g.shape != w.shape:
            max_abs = float("inf")
            continue
        diff = (g.double() - w.double()).abs()
        max_abs = max(max_abs, float(diff.max()) if diff.numel() else 0.0)
        scale = max(scale, float(w.abs().max()) if w.numel() else 0.0)
    if any(torch.isnan(g).any() for g in got):
        max_abs = float("nan")
    max_rel = max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else float("inf"))
    tol = TOLERANCES.get(dtype, 1e-2)
    return {"name": call.op, "implementation": call.implementation, "shape": shape_of(call),
            "dtype": str(dtype).removeprefix("torch."), "max_abs_err": max_abs, "max_rel_err": max_rel,
            "tolerance": tol, "ok": bool(max_rel <= tol), "ms": round(ms, 3), "reference_ms": round(ref_ms, 3)}
