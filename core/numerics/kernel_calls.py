"""Record the kernel calls the engine really makes for a model, then replay each against the reference.

The engine's op namespace (`kernels.dispatch.ops_for`) is shared by every module of a model, so
wrapping its functions sees every call with the model's real shapes and dtypes. Every callable in
the namespace is wrapped, the extra forms dispatch hands out beside an op (a fused MoE's unsummed
forms) included, so a kernel the engine calls cannot go unseen.

One call is kept per *kind of call*: op, phase and variant. A fast implementation picks its code
path by size (the GEMV MoE up to 4 tokens, the sorted grouped GEMMs above; the router kernel up to
64 tokens...), so a decode step's call (every request one token) and a prompt's call are kept
apart; and a layer that calls an op with other options (a sliding window, sinks, a softcap, an
initial state) is kept apart from one without. Each kept call's tensors are copied to the CPU;
`replay` runs it through the device's implementation (in the model's dtype) and through the plain
reference (float32, CPU), and compares what each returned and, for the in-place ops (pools), the
tensors it wrote.
"""

from __future__ import annotations

import inspect
import time
from dataclasses import dataclass

import torch

# Error allowed, relative to the output's largest magnitude, by the dtype the kernel ran in.
TOLERANCES = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 3e-2}
PREFILL, DECODE = "prefill", "decode"
# A serving-sized batch: several prompts in one forward (varlen over several sequences, the large-batch
# tiles and sorts), then their decode steps together (above the GEMV MoE's 4 tokens).
LONG_PREFILL, BATCH_DECODE = "long prefill", "batch decode"


def _parts_summed(out):
    """A fused MoE's unsummed result as the model's next residual add sums it (float32): the parts
    may come in other layouts (the shared expert as S slices or whole) and still be right."""
    if isinstance(out, torch.Tensor):
        return out.float().sum(1)
    return tuple(o.float().sum(1) if o.dim() == 3 else o.float() for o in out)


def _extra_references() -> dict:
    """The reference of each extra form dispatch may hand out beside an op, and how its result is
    compared (kernels.dispatch.ops_for, `extras`)."""
    from bringup.kernels.reference.moe_experts import moe_experts_unsummed
    from bringup.kernels.reference.moe_gated_experts import moe_gated_experts_unsummed
    from bringup.kernels.reference.moe_shared import moe_experts_shared, moe_experts_shared_unsummed

    return {"moe_experts_unsummed": (moe_experts_unsummed, _parts_summed),
            "moe_gated_experts_unsummed": (moe_gated_experts_unsummed, _parts_summed),
            "moe_experts_shared": (moe_experts_shared, None),
            "moe_experts_shared_unsummed": (moe_experts_shared_unsummed, _parts_summed)}


def reference_for(op: str):
    """(reference function, result combiner or None) of an op, or None when it has no reference."""
    from bringup.kernels.reference import OPS

    if op in OPS:
        return OPS[op], None
    return _extra_references().get(op)


@dataclass
class KernelCall:
    op: str
    implementation: str
    args: tuple
    kwargs: dict
    phase: str = PREFILL  # "decode": every request brought one token (the decode-sized path); LONG_PREFILL, BATCH_DECODE
    variant: str = ""  # the options this call set that a plain call leaves out, e.g. "sliding_window=8 sinks"

    @property
    def key(self) -> str:
        """One name per kind of call: `op@phase` or `op@phase:variant` (kernel_rows.split_key reads it back)."""
        return f"{self.op}@{self.phase}" + (f":{self.variant}" if self.variant else "")


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


def variant_of(reference, args, kwargs) -> str:
    """The optional parameters this call set to something other than their default, by the
    reference's signature: "name=value" for a plain value, the name alone for a tensor or a list."""
    if reference is None:
        return ""
    try:
        bound = inspect.signature(reference[0]).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return ""
    said = []
    for name, param in inspect.signature(reference[0]).parameters.items():
        if name not in bound.arguments or param.default is inspect.Parameter.empty:
            continue
        value = bound.arguments[name]
        try:  # (a tuple of tensors compares elementwise: not a default, then)
            default = not isinstance(value, torch.Tensor) and bool(value == param.default)
        except (RuntimeError, TypeError, ValueError):
            default = False
        if value is None or default:
            continue
        said.append(f"{name}={value}" if isinstance(value, (bool, int, float, str)) else name)
    return " ".join(said)


def implementation_of(ops, op: str) -> str:
    """The implementation name of an op, or of the op whose extra form it is (moe_experts_unsummed: moe_experts')."""
    names = ops.implementations
    if op in names:
        return names[op]
    bases = [base for base in names if op.startswith(base + "_")]
    return names[max(bases, key=len)] if bases else "unknown"


def kernel_functions(ops) -> list[str]:
    """Every kernel the namespace hands out: its ops and the extra forms beside them."""
    return [name for name, fn in vars(ops).items() if callable(fn) and not name.startswith("_")]


class PhaseTracker:
    """Tells the recorder the phase of the model's current forward: a forward pre-hook on the model
    reads the batch's own `is_decode_only`; the workload names its prompts' and decodes' phases."""

    def __init__(self):
        self.phase = self.prefill = PREFILL
        self.decode = DECODE

    def hook(self, module, args):
        batch = args[0] if args else None
        self.phase = self.decode if getattr(batch, "is_decode_only", False) else self.prefill


def record_calls(ops, phase_of=None) -> tuple[list[KernelCall], callable]:
    """Wrap every kernel function of `ops`; returns the list the first call of each kind goes into
    and an undo. `phase_of()` names the current phase (a PhaseTracker's), prefill when left out."""
    calls: list[KernelCall] = []
    seen: set[str] = set()
    originals = {}
    for op in kernel_functions(ops):
        fn = getattr(ops, op)
        originals[op] = fn
        reference = reference_for(op)
        impl = implementation_of(ops, op)

        def wrapper(*args, _op=op, _fn=fn, _impl=impl, _ref=reference, **kwargs):
            phase = phase_of() if phase_of is not None else PREFILL
            call = KernelCall(_op, _impl, args, kwargs, phase, variant_of(_ref, args, kwargs))
            if call.key not in seen:  # copied before the call: in-place ops overwrite their inputs
                seen.add(call.key)
                call.args = _map(args, lambda t: t.detach().cpu().clone())
                call.kwargs = _map(kwargs, lambda t: t.detach().cpu().clone())
                calls.append(call)
            return _fn(*args, **kwargs)

        setattr(ops, op, wrapper)

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


def _run(fn, args, kwargs, device, dtype=None, combine=None):
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
    if combine is not None:
        out = combine(out)
    produced = [t.detach().float().cpu() for t in _tensors(out) + _tensors(a) + _tensors(k)]
    return produced, ms


def _model_dtype(call: KernelCall) -> torch.dtype:
    """The least precise floating dtype among its inputs (a bfloat16 x with a float32 state pool is a bfloat16 call)."""
    floats = {t.dtype for t in _tensors(call.args) + _tensors(call.kwargs) if t.is_floating_point()}
    return next((d for d in (torch.bfloat16, torch.float16) if d in floats), torch.float32)


def shape_of(call: KernelCall) -> list[int]:
    tensors = _tensors(call.args)
    return list(tensors[0].shape) if tensors else []


def describe(call: KernelCall) -> dict:
    """The row's identity: which kernel, in which phase and variant, at which shape and dtype."""
    return {"name": call.op, "phase": call.phase, "variant": call.variant, "key": call.key,
            "implementation": call.implementation, "shape": shape_of(call),
            "dtype": str(_model_dtype(call)).removeprefix("torch.")}


def replay(call: KernelCall, device_fn, reference_fn, device, combine=None) -> dict:
    """Device implementation (the recorded dtype) against the reference (float32 on the CPU);
    `combine` turns a result into what the model makes of it before comparing (extra forms)."""
    dtype = _model_dtype(call)
    got, ms = _run(device_fn, call.args, call.kwargs, device, combine=combine)
    want, ref_ms = _run(reference_fn, call.args, call.kwargs, "cpu", torch.float32, combine=combine)
    max_abs, scale = (0.0 if len(got) == len(want) else float("inf")), 0.0
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
    return {**describe(call), "max_abs_err": max_abs, "max_rel_err": max_rel, "tolerance": tol,
            "ok": bool(max_rel <= tol), "ms": round(ms, 3), "reference_ms": round(ref_ms, 3)}
