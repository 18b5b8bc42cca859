"""GGUF Q6_K and Q5_0 blocks on the CPU as a bf16 copy of the weight, dequantised once at load.

Q6_K's scales are per 16 weights, below the 32-weight groups of torch's int4 product, and its codes
6 bits; dequantising its blocks per product (kernels/reference/gguf_blocks.py) took 9.6 ms for a
[576, 1536] layer at one row on this project's 2-core machine (1 thread), 150 times the int4
product of the same shape. Its exact codes widened to bf16 per 16 columns (as gguf_q8_widened.py
does per 32) took 0.36 ms, and 32-39 ms for a [49152, 576] output projection against 21 for its
float32 copy. The bf16 copy, each weight rounded once to bf16 (2 bytes a weight; the blocks hold
0.82, a float32 copy 4), took 0.15-0.17 ms and 17 ms: the fastest, with the error of the int4
product's bf16 scales and zeros (about 3e-3 of the largest output). Q5_0 (llama.cpp's fallback
where 256 does not divide a row: Gemma 3 270M's attention and MLP) has 5-bit codes, which no torch
product reads either: the same copy. The product: bf16 activations, float32 output and bias.
Reference: kernels/reference/gguf_blocks.py (`gguf_linear`), float32 on the blocks.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..reference.gguf_blocks import dequantize_blocks

ROWS_PER_CHUNK = 4096  # rows dequantised at a time (one slab's float32, not the whole matrix's)


def bf16_copy(blocks: torch.Tensor, ggml_type: str, cols: int) -> torch.Tensor:
    """Blocks [N, row bytes] -> the weight [N, cols] in bf16 (each weight rounded once)."""
    out = torch.empty((blocks.shape[0], cols), dtype=torch.bfloat16, device=blocks.device)
    for s in range(0, blocks.shape[0], ROWS_PER_CHUNK):
        out[s:s + ROWS_PER_CHUNK] = dequantize_blocks(blocks[s:s + ROWS_PER_CHUNK], ggml_type, cols)
    return out


def bf16_copy_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """x [..., K] times the bf16 weight [N, K], transposed, in x's dtype (bf16 inside)."""
    out = F.linear(x.to(torch.bfloat16), weight).float()
    if bias is not None:
        out = out + bias.float()
    return out.to(x.dtype)
