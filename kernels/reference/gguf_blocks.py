"""llama.cpp's quantized blocks in plain torch: dequantise, and the linear layer and embedding that
read them, a slab of rows at a time.

A GGUF matrix [N, K] of a block type is stored row by row, each row K / block_size blocks of a
fixed byte size (ggml's layouts, as gguf-py's `quants` module decodes them):
- Q8_0 (34 bytes / 32): fp16 d, 32 int8 q; w = d * q
- Q4_0 (18 / 32): fp16 d, 16 bytes of nibbles (low nibbles are elements 0-15, high 16-31); w = d * (q - 8)
- Q4_1 (20 / 32): fp16 d, fp16 m, nibbles as Q4_0; w = d * q + m
- Q5_0 (22 / 32): fp16 d, 4 bytes (a little-endian uint32) whose bit i is element i's fifth bit,
  nibbles as Q4_0; w = d * (q - 16) (llama.cpp's fallback where a K type's 256 does not divide a row)
- Q4_K (144 / 256): fp16 d, fp16 dmin, 12 bytes of 6-bit scales and mins for 8 sub-blocks of 32,
  128 bytes of nibbles (each 32 bytes: low nibbles one sub-block, high nibbles the next); w = d*sc*q - dmin*m
- Q6_K (210 / 256): 128 bytes of low 4 bits, 64 of high 2 bits, 16 int8 scales (one per 16), fp16 d;
  w = d * scale * (q - 32)
Weights stay in these bytes; each product dequantises ROWS_PER_CHUNK rows into float32 at a time.
The tests check every decoder against gguf-py's numpy `dequantize`.
"""

from __future__ import annotations

import torch

# ggml type -> (weights per block, bytes per block)
BLOCKS = {"Q8_0": (32, 34), "Q4_0": (32, 18), "Q4_1": (32, 20), "Q5_0": (32, 22), "Q4_K": (256, 144),
          "Q6_K": (256, 210)}
ROWS_PER_CHUNK = 1024


def row_bytes(ggml_type: str, cols: int) -> int:
    per, size = BLOCKS[ggml_type]
    if cols % per:
        raise ValueError(f"{ggml_type} rows hold blocks of {per} weights; {cols} columns is not a multiple")
    return cols // per * size


def _f16(b: torch.Tensor) -> torch.Tensor:
    """[..., 2] uint8 (little-endian) -> [...] float32."""
    return b.contiguous().view(torch.float16)[..., 0].float()


def _nibbles(qs: torch.Tensor) -> torch.Tensor:
    """[..., n] bytes -> [..., 2n]: the n low nibbles, then the n high ones."""
    return torch.cat([qs & 0x0F, qs >> 4], dim=-1)


def _q8_0(b):
    return _f16(b[..., 0:2])[..., None] * b[..., 2:].view(torch.int8).float()


def _q4_0(b):
    return _f16(b[..., 0:2])[..., None] * (_nibbles(b[..., 2:]).float() - 8)


def _q4_1(b):
    return _f16(b[..., 0:2])[..., None] * _nibbles(b[..., 4:]).float() + _f16(b[..., 2:4])[..., None]


def _q5_0(b):
    high = b[..., 2:6].contiguous().view(torch.int32)  # [..., 1]: one bit an element
    bits = (high >> torch.arange(32, dtype=torch.int32, device=b.device)) & 1
    return _f16(b[..., 0:2])[..., None] * ((_nibbles(b[..., 6:]).int() | (bits << 4)).float() - 16)


def q4_k_scales(s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The 12 scale bytes of Q4_K blocks [..., 12] -> (scales, mins) [..., 8], 6 bits each."""
    lo, hi = s[..., 0:4], s[..., 4:8]
    sc = torch.cat([lo & 63, (s[..., 8:12] & 0x0F) | ((lo >> 6) << 4)], dim=-1)
    mn = torch.cat([hi & 63, (s[..., 8:12] >> 4) | ((hi >> 6) << 4)], dim=-1)
    return sc.float(), mn.float()


def q4_k_codes(b: torch.Tensor) -> torch.Tensor:
    """Q4_K blocks [..., 144] -> the 256 4-bit codes [..., 8, 32], one row per sub-block."""
    qs = b[..., 16:].reshape(*b.shape[:-1], 4, 32)
    return torch.stack([qs & 0x0F, qs >> 4], dim=-2).reshape(*b.shape[:-1], 8, 32)


def _q4_k(b):
    d, dmin = _f16(b[..., 0:2]), _f16(b[..., 2:4])
    sc, mn = q4_k_scales(b[..., 4:16])
    w = (d[..., None] * sc)[..., None] * q4_k_codes(b).float() - (dmin[..., None] * mn)[..., None]
    return w.reshape(*b.shape[:-1], 256)


def _q6_k(b):
    ql = b[..., 0:128].reshape(*b.shape[:-1], 2, 64)
    qh = b[..., 128:192].reshape(*b.shape[:-1], 2, 1, 32)
    scales = b[..., 192:208].view(torch.int8).float().reshape(*b.shape[:-1], 16, 1)
    d = _f16(b[..., 208:210])
    low = torch.cat([ql[..., :32] & 0x0F, ql[..., 32:] & 0x0F, ql[..., :32] >> 4, ql[..., 32:] >> 4], dim=-1)
    shifts = torch.tensor([0, 2, 4, 6], dtype=torch.uint8, device=b.device).repeat_interleave(32)
    high = (qh.expand(*qh.shape[:-2], 4, 32).reshape(*b.shape[:-1], 2, 128) >> shifts) & 3
    q = (low | (high << 4)).float() - 32  # [..., 2, 128]
    w = q.reshape(*b.shape[:-1], 16, 16) * scales
    return d[..., None] * w.reshape(*b.shape[:-1], 256)


_DECODERS = {"Q8_0": _q8_0, "Q4_0": _q4_0, "Q4_1": _q4_1, "Q5_0": _q5_0, "Q4_K": _q4_k, "Q6_K": _q6_k}


def dequantize_blocks(blocks: torch.Tensor, ggml_type: str, cols: int) -> torch.Tensor:
    """uint8 rows [N, row_bytes] of `ggml_type` blocks -> float32 [N, cols]."""
    per, size = BLOCKS[ggml_type]
    rows = blocks.shape[0]
    return _DECODERS[ggml_type](blocks.reshape(rows, cols // per, size)).reshape(rows, cols)


def gguf_linear(x: torch.Tensor, blocks: torch.Tensor, ggml_type: str, cols: int,
                bias: torch.Tensor | None = None) -> torch.Tensor:
    """x [..., cols] times the dequantised weight [N, cols], transposed, in x's dtype (float32 math,
    ROWS_PER_CHUNK rows of the weight dequantised at a time)."""
    flat = x.reshape(-1, cols).float()
    n = blocks.shape[0]
    out = torch.cat([flat @ dequantize_blocks(blocks[s:s + ROWS_PER_CHUNK], ggml_type, cols).T
                     for s in range(0, n, ROWS_PER_CHUNK)], dim=-1)
    if bias is not None:
        out = out + bias.float()
    return out.to(x.dtype).reshape(*x.shape[:-1], n)


def gguf_embedding(ids: torch.Tensor, blocks: torch.Tensor, ggml_type: str, cols: int, dtype: torch.dtype):
    """The rows `ids` of a quantized embedding table, dequantised (only the rows looked up)."""
    flat = ids.reshape(-1)
    return dequantize_blocks(blocks.index_select(0, flat), ggml_type, cols).to(dtype).reshape(*ids.shape, cols)
