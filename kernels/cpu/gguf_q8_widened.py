"""A GGUF Q8_0 matrix widened once for the CPU: its int8 codes as bf16, block by block, beside its scales.

Layout: codes [K/32, N, 32] bf16 (an int8 code is exact in bf16) and scales [K/32, N] float32 (the
fp16 d, exact). Two bytes a weight where the blocks hold 34/32: the form for a matrix read whole
every step, SmolLM2's tied [49152, 576] output projection, which otherwise needed a float32 copy
(4 bytes a weight) beside the blocks that its embedding kept reading. One form serves both:
- the product, y = sum over blocks b of scale[b] * (x[:, b] . codes[b]): one bf16 F.linear per
  block of 32 columns (the codes of a block contiguous, [N, 32]), each scaled and summed in
  float32. On this project's 2-core machine (1 thread, [49152, 576]) it took 8.6 ms at one row, 13
  at four, 19 at sixteen, against 8.3, 19 and 27 for the float32 matrix; one bmm over all blocks
  was as fast at one row and 2.5-3.5x slower from four rows on.
- the embedding's rows: codes times scale, exactly the dequantised weight.
Reference: kernels/reference/gguf_blocks.py (`gguf_linear`, `gguf_embedding`) reading the blocks.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

BLOCK = 32
ROWS_PER_CHUNK = 4096  # rows widened at a time (the temporaries of one slab, not of the whole matrix)


def widen_q8_0(blocks: torch.Tensor, cols: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Q8_0 blocks [N, cols/32*34] uint8 -> (codes [cols/32, N, 32] bf16, scales [cols/32, N] float32)."""
    n, nb = blocks.shape[0], cols // BLOCK
    codes = torch.empty((nb, n, BLOCK), dtype=torch.bfloat16, device=blocks.device)
    scales = torch.empty((nb, n), dtype=torch.float32, device=blocks.device)
    for s in range(0, n, ROWS_PER_CHUNK):
        b = blocks[s:s + ROWS_PER_CHUNK].reshape(-1, nb, 34)
        codes[:, s:s + b.shape[0]] = b[..., 2:].view(torch.int8).permute(1, 0, 2)
        scales[:, s:s + b.shape[0]] = b[..., :2].contiguous().view(torch.float16)[..., 0].T
    return codes, scales


def widened_linear(x: torch.Tensor, codes: torch.Tensor, scales: torch.Tensor,
                   bias: torch.Tensor | None = None) -> torch.Tensor:
    """x [..., K] times the widened weight [N, K], transposed, in x's dtype (bf16 activations and
    block dot products, float32 scales and sums)."""
    nb, n, _ = codes.shape
    flat = x.reshape(-1, nb, BLOCK).to(torch.bfloat16)
    out = torch.zeros(flat.shape[0], n, dtype=torch.float32, device=x.device)
    for b in range(nb):
        out.addcmul_(F.linear(flat[:, b], codes[b]), scales[b])
    if bias is not None:
        out = out + bias.float()
    return out.to(x.dtype).reshape(*x.shape[:-1], n)


def widened_rows(ids: torch.Tensor, codes: torch.Tensor, scales: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The rows `ids` of the widened weight, dequantised (an embedding lookup)."""
    flat = ids.reshape(-1)
    rows = codes.index_select(1, flat).float() * scales.index_select(1, flat)[..., None]  # [K/32, M, 32]
    return rows.permute(1, 0, 2).reshape(*ids.shape, -1).to(dtype)
