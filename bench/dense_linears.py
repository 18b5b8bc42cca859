"""bench/families.py --dense-gemv all: every linear layer's product of up to 16 rows in bf16 / fp16
through the Triton dense GEMV (kernels/triton/dense_gemv.py) instead of torch's (cuBLAS), for as long
as the engine lives (its decode graphs capture it): whether the GEMV beats cuBLAS over all of a
model's decode-size products, measured end to end before any model is wired to it. Products of more
rows, or in float32, stay torch's (dense_gemv.linear says where)."""

from __future__ import annotations

import torch.nn.functional as F
from torch.overrides import TorchFunctionMode


class DenseGemvLinears(TorchFunctionMode):
    """Inside: F.linear on an accelerator (or on the CPU under Triton's interpreter) is dense_gemv.linear."""

    def __init__(self):
        super().__init__()
        from bringup.kernels.triton import dense_gemv
        from bringup.kernels.triton.launch import interpreted

        self.linear, self.on_cpu = dense_gemv.linear, interpreted()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.linear and (args[0].device.type != "cpu" or self.on_cpu):
            bias = args[2] if len(args) > 2 else kwargs.get("bias")
            return self.linear(args[0], args[1], bias)  # (this mode is off inside its own handler)
        return func(*args, **kwargs)
