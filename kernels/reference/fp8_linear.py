"""Block-scaled fp8_e4m3 weights: quantise, dequantise, and the linear layer that reads them.

The layout is the one DeepSeek-V3 / Qwen3 FP8 checkpoints store (transformers' FineGrainedFP8):
`weight` [N, K] in float8_e4m3fn and `weight_scale_inv` [ceil(N/bn), ceil(K/bk)] in float32, one
scale per (bn x bk) block, the real weight being `weight * scale` over each block. A per-tensor
scale is the same thing with one block covering the whole matrix. Expert stacks add a leading
expert dimension to both. These are the references the Triton kernels (kernels/triton/fp8_linear.py)
are tested against: plain torch, dequantising in float32.
"""

from __future__ import annotations

import torch

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0  # largest finite e4m3fn value
# Rows of the weight dequantised at once by the reference linear (bounds its float32 copy).
ROWS_PER_CHUNK = 2048
# The "block" of a per-tensor scale: larger than any matrix, so every element reads scale [0, 0].
PER_TENSOR_BLOCK = (1 << 30, 1 << 30)


def scale_shape(shape, block: tuple[int, int]) -> tuple[int, ...]:
    """The scale grid of a weight of `shape` ([..., N, K]) in blocks of `block`."""
    *lead, n, k = shape
    return (*lead, -(-n // block[0]), -(-k // block[1]))


def expand_scale(scale: torch.Tensor, n: int, k: int, block: tuple[int, int]) -> torch.Tensor:
    """The per-element scale [..., n, k] of a block grid (a block may exceed the matrix: per tensor)."""
    rows = torch.arange(n, device=scale.device) // block[0]
    cols = torch.arange(k, device=scale.device) // block[1]
    return scale.index_select(-2, rows).index_select(-1, cols)


def dequantize_fp8_block(weight: torch.Tensor, scale: torch.Tensor, block: tuple[int, int],
                         dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """weight [..., N, K] fp8 and its scale grid -> the real weight in `dtype`."""
    n, k = weight.shape[-2:]
    return (weight.float() * expand_scale(scale.float(), n, k, block)).to(dtype)


def quantize_fp8_block(weight: torch.Tensor, block: tuple[int, int]) -> tuple[torch.Tensor, torch.Tensor]:
    """(fp8 weight, float32 scale grid) with each block's absolute maximum at FP8_MAX, as the
    checkpoints' converters do."""
    *lead, n, k = weight.shape
    bn, bk = min(block[0], n), min(block[1], k)  # a block as large as the matrix: one scale per tensor
    pn, pk = -(-n // bn) * bn, -(-k // bk) * bk
    w = torch.nn.functional.pad(weight.float(), (0, pk - k, 0, pn - n))
    blocks = w.reshape(*lead, pn // bn, bn, pk // bk, bk)
    amax = blocks.abs().amax(dim=(-3, -1), keepdim=True).clamp(min=1e-12)
    scale = amax / FP8_MAX
    q = (blocks / scale).clamp(-FP8_MAX, FP8_MAX).to(FP8).reshape(*lead, pn, pk)[..., :n, :k]
    return q.contiguous(), scale.reshape(*lead, pn // bn, pk // bk).contiguous()


def fp8_linear(x: torch.Tensor, weight: torch.Tensor, scale: torch.Tensor, block: tuple[int, int],
               bias: torch.Tensor | None = None) -> torch.Tensor:
    """x [..., K] times the dequantised weight [N, K], transposed, in x's dtype (computed in float32,
    a slab of rows of the weight at a time, so the float32 copy stays small)."""
    n = weight.shape[0]
    flat = x.reshape(-1, x.shape[-1]).float()
    bn = min(block[0], n)
    step = max(bn, ROWS_PER_CHUNK // bn * bn)
    outs = []
    for start in range(0, n, step):
        w = dequantize_fp8_block(weight[start:start + step], scale[start // bn:(start + step) // bn + 1],
                                 block)
        outs.append(flat @ w.T)
    out = torch.cat(outs, dim=-1) if outs else flat.new_zeros(flat.shape[0], 0)
    if bias is not None:
        out = out + bias.float()
    return out.to(x.dtype).reshape(*x.shape[:-1], n)
