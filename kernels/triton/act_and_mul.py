"""act(gate) * up in one Triton kernel (kernels/reference/act_and_mul.py): the activation and the
product of a gated MLP after its one gate/up product, where torch takes two kernels (three for an
exact GELU). Math in float32, the activation rounded to the input dtype before the product, as the
reference does."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .launch import next_pow2, num_warps

# activation name -> the kernel's ACT switch (others run the reference)
ACTS = {"silu": 0, "swish": 0, "gelu_pytorch_tanh": 1, "gelu": 2, "relu": 3}
BLOCK = 1024  # columns per program


@triton.jit
def _act_and_mul_kernel(x_ptr, y_ptr, I, s_x, s_y, ACT: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    ok = cols < I
    g = tl.load(x_ptr + row * s_x + cols, mask=ok, other=0.0).to(tl.float32)
    u = tl.load(x_ptr + row * s_x + I + cols, mask=ok, other=0.0).to(tl.float32)
    if ACT == 0:
        a = g * tl.sigmoid(g)
    elif ACT == 1:  # 0.5 (1 + tanh z) is sigmoid(2z): no tanh call (libdevice), no cancellation at z << 0
        z = 0.7978845608028654 * (g + 0.044715 * g * g * g)
        a = g * tl.sigmoid(2.0 * z)
    elif ACT == 2:
        a = 0.5 * g * (1.0 + tl.math.erf(g * 0.7071067811865476))
    else:
        a = tl.maximum(g, 0.0)
    a = a.to(y_ptr.dtype.element_ty).to(tl.float32)
    tl.store(y_ptr + row * s_y + cols, (a * u).to(y_ptr.dtype.element_ty), mask=ok)


def act_and_mul(x: torch.Tensor, act: str) -> torch.Tensor:
    """Same arguments and result as kernels.reference.act_and_mul (2-D x, rows of unit column stride)."""
    if act not in ACTS or x.dim() != 2 or x.stride(-1) != 1 or x.shape[-1] % 2:
        from ..reference import act_and_mul as reference

        return reference(x, act)
    T, I = x.shape[0], x.shape[1] // 2
    y = torch.empty((T, I), dtype=x.dtype, device=x.device)
    if T and I:
        block = min(BLOCK, next_pow2(I, 16))
        _act_and_mul_kernel[(T, triton.cdiv(I, block))](x, y, I, x.stride(0), y.stride(0), ACT=ACTS[act],
                                                         BLOCK=block, num_warps=num_warps(x.device.type, 4))
    return y
