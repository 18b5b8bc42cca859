"""Kernels one decode step launches with the GPU's op set, counted on a CPU.

bench/families.py counts kernels per decode step on a GPU with torch.profiler: every device kernel of
an eager `engine.step()` but memcpy and memset (bench/nano_full.py: profile_decode). Without a GPU the
same step runs here with the GPU's op set, its Triton kernels under Triton's interpreter
(TRITON_INTERPRET=1, set before triton is imported), and each launch is counted where it is made:
- a Triton kernel launch (the interpreter's `InterpretedFunction.run`) is one kernel; the torch ops
  the interpreter runs to stage its arguments are not counted;
- an aten op (seen by a TorchDispatchMode) is one kernel unless it only makes a view or an
  allocation, reads a value back to the host, or is a plain copy (same dtype, both contiguous): on a
  GPU those are no kernel, or a memcpy, which the profiler count leaves out too.
A GEMM is one aten op here and one kernel there (cuBLAS may add a split-K reduction on a GPU: the
GPU count can be a little higher). Host-side tensors (the step's inputs before their upload) are CPU
tensors on a GPU too; here they cannot be told apart, so only the runner's step is counted (the
batch's upload, the forward, the sampling: `count_decode_step`), not the scheduler's host work.
"""

from __future__ import annotations

import os
from collections import Counter
from contextlib import contextmanager

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# aten ops that launch nothing on a GPU: allocations, metadata, host reads (a memcpy), no-ops.
NOT_KERNELS = frozenset({
    "empty", "empty_strided", "empty_like", "new_empty", "new_empty_strided", "_unsafe_view", "detach",
    "alias", "detach_", "lift_fresh", "lift_fresh_copy", "_local_scalar_dense", "resize_", "set_", "record_stream",
    "is_same_size", "_has_compatible_shallow_copy_type", "sym_size", "sym_stride", "sym_numel",
})


def _returns_view(func) -> bool:
    """True when every output aliases an input without writing it (view, reshape, split, t...)."""
    returns = func._schema.returns
    return bool(returns) and all(r.alias_info is not None and not r.alias_info.is_write for r in returns)


def _plain_copy(dst: torch.Tensor, src: torch.Tensor) -> bool:
    """A same-dtype copy between contiguous tensors: cudaMemcpy on a GPU, not a kernel."""
    return (dst.dtype == src.dtype and dst.shape == src.shape and dst.is_contiguous() and src.is_contiguous())


def launches_kernel(func, args, kwargs, out) -> bool:
    """Would this aten op (called with args, kwargs, giving out) launch a device kernel on a GPU
    (memcpy and memset aside)?"""
    name = func._schema.name.split("::")[-1]
    if name in NOT_KERNELS:
        return False
    if name in ("to", "contiguous"):  # give the input itself when nothing changes; a plain copy is a memcpy
        src = args[0]
        return out is not src and (out.dtype != src.dtype or not src.is_contiguous())
    if _returns_view(func):
        return False
    if name == "copy_":
        return not _plain_copy(args[0], args[1])
    if name in ("_to_copy", "clone"):
        return out.dtype != args[0].dtype or not args[0].is_contiguous()
    return True


class LaunchCounter(TorchDispatchMode):
    """Counts kernels by name while active: aten ops as `launches_kernel` judges them, and Triton
    launches under the interpreter ("triton:<kernel name>")."""

    def __init__(self):
        super().__init__()
        self.counts: Counter = Counter()
        self._in_triton = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if not self._in_triton and launches_kernel(func, args, kwargs, out):
            self.counts[f"aten:{func._schema.name.split('::')[-1]}"] += 1
        return out

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @contextmanager
    def _triton_hook(self):
        from triton.runtime.interpreter import InterpretedFunction

        original = InterpretedFunction.run
        counter = self

        def run(fn, *args, grid, warmup, **kwargs):
            if warmup:
                return original(fn, *args, grid=grid, warmup=warmup, **kwargs)
            counter.counts[f"triton:{fn.__name__}"] += 1
            counter._in_triton += 1
            try:
                return original(fn, *args, grid=grid, warmup=warmup, **kwargs)
            finally:
                counter._in_triton -= 1

        InterpretedFunction.run = run
        try:
            yield
        finally:
            InterpretedFunction.run = original

    def __enter__(self):
        self._hook = None
        if interpreting():
            self._hook = self._triton_hook()
            self._hook.__enter__()
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            if self._hook is not None:
                self._hook.__exit__(*exc)


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "") == "1"


def use_gpu_ops_on_cpu() -> dict[str, str]:
    """Make the CPU run the GPUs' op set: their Triton kernels under the interpreter, the reference
    where the GPU has no fast op (the CPU's own versions set aside), q/k/v and gate/up as one product.
    Call before the model is built; returns {op: implementation} as registered."""
    if not interpreting():
        raise RuntimeError("the GPU op set runs on a CPU only under Triton's interpreter: set TRITON_INTERPRET=1 "
                           "before triton is imported (and have triton installed)")
    from bringup.core.engine.models.fused_gate_up import FusedGateUp
    from bringup.core.engine.models.fused_qkv import FusedQKV
    from bringup.kernels import dispatch
    from bringup.kernels.triton.registration import register_interpreted_ops

    FusedQKV.fuse_qkv = FusedGateUp.fuse_gate_up = True
    return register_interpreted_ops(dispatch)


def count_decode_step(engine, steps: int = 1) -> tuple[float, Counter]:
    """(kernels per decode step, their names) over `steps` eager decode steps of the requests the
    engine holds (each must be past its prompt): what the runner launches for a step (the batch's
    upload, the forward, the sampling), as profile_decode counts over a GPU's eager steps."""
    runner = engine.runner
    saved = runner.decode_graphs, runner.compiled_decode
    runner.decode_graphs = runner.compiled_decode = None
    counter = LaunchCounter()
    run = runner.run

    def counted(step):
        with counter:
            return run(step)

    runner.run = counted
    try:
        for _ in range(steps):
            engine.step()
    finally:
        del runner.run  # the method again
        runner.decode_graphs, runner.compiled_decode = saved
    return counter.total / steps, counter.counts


# Config keys of a plain decoder's widths and the small values a count runs at (the layer list and
# every switch stay as they are: a launch count depends on those, not on the widths).
SMALL_WIDTHS = {"hidden_size": 64, "intermediate_size": 96, "moe_intermediate_size": 32, "num_attention_heads": 4,
                "num_key_value_heads": 2, "head_dim": 16, "query_pre_attn_scalar": 16, "vocab_size": 256}


def small_widths(config: dict) -> dict:
    """The config at small widths, its layers kept: heads 4 query / 2 KV (1 KV where it had 1), experts
    at most 8, token ids inside the small vocabulary."""
    out = dict(config)
    for key, value in SMALL_WIDTHS.items():
        if key in out:
            out[key] = value
    if config.get("num_key_value_heads") == 1:
        out["num_key_value_heads"] = 1
    if isinstance(config.get("rotary_dim"), int) and isinstance(config.get("head_dim"), int):
        # a partial rotary keeps its share of the (smaller) head (MiniMax: 64 of 128)
        out["rotary_dim"] = max(2, config["rotary_dim"] * out["head_dim"] // config["head_dim"])
    for key in ("num_local_experts", "num_experts", "n_routed_experts"):
        if isinstance(out.get(key), int):
            out[key] = min(out[key], 8)
    for key in ("num_experts_per_tok", "experts_per_token"):
        if isinstance(out.get(key), int):
            out[key] = min(out[key], 2)
    for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
        ids = out.get(key)
        if isinstance(ids, int) and ids >= SMALL_WIDTHS["vocab_size"]:
            out[key] = SMALL_WIDTHS["vocab_size"] - 1
        elif isinstance(ids, list):
            out[key] = [i if i < SMALL_WIDTHS["vocab_size"] else SMALL_WIDTHS["vocab_size"] - 1 for i in ids]
    return out


@contextmanager
def gpu_weight_layout():
    """CPU engines built inside keep the checkpoint's weight layout, as a GPU does (the CPU's re-layout,
    core/engine/cpu_linears.py, strides the weights so some kernels would leave their fast path)."""
    from bringup.core.engine import cpu_linears

    relayout, cpu_linears.prepare_linears_for_cpu = cpu_linears.prepare_linears_for_cpu, lambda model: 0
    try:
        yield
    finally:
        cpu_linears.prepare_linears_for_cpu = relayout


def count_config(config: dict, *, dtype: str = "bfloat16", prompt: int = 16) -> dict:
    """Kernels of one decode step of `config` (a config.json dict; see `small_widths`) with dummy
    weights in `dtype` on the CPU, one request past a `prompt`-token prompt, as bench/families.py
    profiles a GPU. Needs `use_gpu_ops_on_cpu()` first. The CPU's re-layout of the linear weights
    (core/engine/cpu_linears.py) is left out: a GPU keeps the checkpoint's layout, and some kernels
    take their fast path only on it. Returns {kernels_per_step, blocks, kernels_per_50_blocks, names}."""
    import json
    import tempfile
    from pathlib import Path

    from bringup.core.engine.config import EngineConfig
    from bringup.core.engine.engine import Engine
    from bringup.core.engine.sampling import SamplingParams

    with gpu_weight_layout(), tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config.json"
        path.write_text(json.dumps(config))
        engine = Engine(EngineConfig(str(path), device="cpu", dtype=dtype, load_format="dummy",
                                     max_running_requests=1, context_length=4 * prompt, cpu_compile=False,
                                     warmup=False), log=lambda m: None)
    engine.add_request([5] * prompt, SamplingParams(max_new_tokens=4, temperature=0.0, ignore_eos=True),
                       detokenize=False)
    engine.step()  # the prompt
    engine.step()  # a first decode step (one-time work)
    per_step, names = count_decode_step(engine)
    blocks = len(engine.layer_map.layers)
    return {"kernels_per_step": per_step, "blocks": blocks, "kernels_per_50_blocks": per_step * 50 / blocks,
            "names": names}
