"""bench/families.py --dense-gemv all: inside the engine's model forward, every linear product of up
to 16 rows in bf16 / fp16 through the Triton dense GEMV (kernels/triton/dense_gemv.py) instead of
torch's (cuBLAS); the decode graphs capture it. Whether the GEMV beats cuBLAS over all of a model's
decode-size products, measured end to end before any model is wired to it. Only the forward is
touched (the host's own work per step, and the transformers twin, run as before); products of more
rows, or in float32, stay torch's (dense_gemv.linear says where)."""

from __future__ import annotations

from contextlib import contextmanager

import torch.nn.functional as F
from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
from torch.overrides import TorchFunctionMode


class DenseGemvLinears(TorchFunctionMode):
    """Inside: F.linear on an accelerator (or on the CPU under Triton's interpreter) is dense_gemv.linear."""

    def __init__(self, linear, on_cpu: bool):
        super().__init__()
        self.linear, self.on_cpu = linear, on_cpu

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.linear and (args[0].device.type != "cpu" or self.on_cpu):
            bias = args[2] if len(args) > 2 else kwargs.get("bias")
            return self.linear(args[0], args[1], bias)  # (this mode is off inside its own handler)
        return func(*args, **kwargs)


@contextmanager
def dense_gemv_linears():
    """While inside, each engine model's forward (bringup's CausalLM) runs under DenseGemvLinears."""
    from bringup.core.engine.models.base import CausalLM
    from bringup.kernels.triton import dense_gemv
    from bringup.kernels.triton.launch import interpreted

    active = []

    def enter(module, args):
        if isinstance(module, CausalLM):
            active.append(DenseGemvLinears(dense_gemv.linear, interpreted()))
            active[-1].__enter__()

    def leave(module, args, out):
        if isinstance(module, CausalLM) and active:
            active.pop().__exit__(None, None, None)

    handles = [register_module_forward_pre_hook(enter), register_module_forward_hook(leave, always_call=True)]
    try:
        yield
    finally:
        for h in handles:
            h.remove()
