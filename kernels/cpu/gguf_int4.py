"""GGUF's 4-bit blocks (Q4_0, Q4_1, Q4_K) through torch's int4 weight-only product on the CPU.

Every one of these types is, per group of 32 weights, w = (q - 8) * scale + zero with a 4-bit code
q: Q4_0 (scale d, zero 0), Q4_1 (d, m + 8d), Q4_K (d*sc, 8*d*sc - dmin*m per sub-block). So the
codes are re-laid once, at load, into the layout of `aten._weight_int4pack_mm_for_cpu` (still half
a byte a weight) beside a [K/32, N, 2] table of scale and zero, and each product reads 4 bits a
weight with bf16 activations (the kernel's fast path: on this project's 2-core machine a
[1536, 576] product at one row takes 28 us against 40 us for the float32 matrix). The scales and
zeros are rounded to bf16 there (the kernel's type), an error of at most 2^-9 of a weight:
kernels/reference/gguf_blocks.py is the exact reference the tests compare with.
"""

from __future__ import annotations

import torch

from ..reference.gguf_blocks import BLOCKS, _f16, _nibbles, q4_k_codes, q4_k_scales

INT4_TYPES = ("Q4_0", "Q4_1", "Q4_K")
GROUP = 32


def _codes_scales_zeros(blocks: torch.Tensor, ggml_type: str, cols: int):
    """(codes [N, cols] int32 in 0..15, scale [N, cols/32], zero [N, cols/32]) in float32."""
    per, size = BLOCKS[ggml_type]
    n = blocks.shape[0]
    b = blocks.reshape(n, cols // per, size)
    if ggml_type == "Q4_K":
        d, dmin = _f16(b[..., 0:2]), _f16(b[..., 2:4])
        sc, mn = q4_k_scales(b[..., 4:16])
        scale = d[..., None] * sc
        zero = 8 * scale - dmin[..., None] * mn
        codes = q4_k_codes(b)
    else:
        scale = _f16(b[..., 0:2])[..., None]
        zero = torch.zeros_like(scale) if ggml_type == "Q4_0" else _f16(b[..., 2:4])[..., None] + 8 * scale
        codes = _nibbles(b[..., 4 if ggml_type == "Q4_1" else 2:])
    return codes.reshape(n, cols).to(torch.int32), scale.reshape(n, -1), zero.reshape(n, -1)


def pack_int4(blocks: torch.Tensor, ggml_type: str, cols: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(packed codes for the int4 product, scales and zeros [cols/32, N, 2] in bf16)."""
    codes, scale, zero = _codes_scales_zeros(blocks, ggml_type, cols)
    packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(codes.contiguous(), 1)
    table = torch.stack([scale.T, zero.T], dim=-1).to(torch.bfloat16).contiguous()
    return packed, table


def int4_linear(x: torch.Tensor, packed: torch.Tensor, table: torch.Tensor, cols: int,
                bias: torch.Tensor | None = None) -> torch.Tensor:
    """x [..., cols] times the 4-bit weight, in x's dtype (bf16 inside the product)."""
    flat = x.reshape(-1, cols)
    out = torch.ops.aten._weight_int4pack_mm_for_cpu(flat.to(torch.bfloat16).contiguous(), packed, GROUP, table)
    if bias is not None:
        out = out + bias.to(out.dtype)
    return out.to(x.dtype).reshape(*x.shape[:-1], out.shape[-1])
