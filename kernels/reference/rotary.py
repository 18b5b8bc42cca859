"""Rotary position embedding (the half-split "rotate_half" form Llama, Qwen and Mistral use)."""

from __future__ import annotations

import torch


def apply_rotary(x: torch.Tensor, positions: torch.Tensor, inv_freq: torch.Tensor, scaling: float = 1.0) -> torch.Tensor:
    """x [T, H, D] with D = 2 * len(inv_freq) rotary dims, positions [T]. Returns x rotated."""
    freqs = positions.float()[:, None] * inv_freq.float()[None, :]  # [T, D/2]
    emb = torch.cat([freqs, freqs], dim=-1)
    cos = (emb.cos() * scaling).to(x.dtype)[:, None, :]
    sin = (emb.sin() * scaling).to(x.dtype)[:, None, :]
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin
