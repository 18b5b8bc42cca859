"""GQA attention as the Mamba2 hybrids (Bamba, Granite-4.0-H, Falcon-H1) build it: q/k/v/o
projections, optional RoPE over the first `rotary_dim` channels of each head (Bamba rotates half),
and a softmax scale the family chooses (Granite's attention_multiplier; head_dim ** -0.5 elsewhere).
Geometry comes from the layer map (`layer.attention`); the RoPE table from `batch.memo[ROPE_KEY]`, which the
model fills once per forward (`RopeTable.begin`).
"""

from __future__ import annotations

import torch
from torch import nn

from .attention import head_geometry, paged_attention, rotary_attention
from .base import linear
from .fused_qkv import FusedQKV
from .rope import inv_freq_for

ROPE_KEY = "rope_inv_freq"


class HybridAttention(FusedQKV, nn.Module):
    """q/k/v as one product on accelerators (fused_qkv.py); the rotary, the cache write and the decode
    attention through rotary_attention, so the fused forms run where the device has them."""

    def __init__(self, cfg, layer, ops, *, scale: float | None = None, rope: bool = True, in_dim: int | None = None):
        super().__init__()
        self.layer_id, self.ops = layer.index, ops
        self.num_heads, self.num_kv_heads, self.head_dim = head_geometry(layer)
        self.scale = self.head_dim ** -0.5 if scale is None else float(scale)
        self.rope = rope
        d_in = in_dim or cfg.hidden_size
        bias = bool(cfg.get("attention_bias", False))
        self.q_proj = linear(d_in, self.num_heads * self.head_dim, bias)
        self.k_proj = linear(d_in, self.num_kv_heads * self.head_dim, bias)
        self.v_proj = linear(d_in, self.num_kv_heads * self.head_dim, bias)
        self.o_proj = linear(self.num_heads * self.head_dim, cfg.hidden_size, bias)

    def forward(self, hidden: torch.Tensor, batch) -> torch.Tensor:
        q, k, v = self.project_qkv(hidden)
        return self.attend(q, k, v, batch, self.layer_id)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, batch, layer_id: int) -> torch.Tensor:
        """RoPE (over the first rotary_dim channels: the table's width), the paged KV cache of `layer_id` (a
        shared block passes the id of the layer using it), o_proj."""
        if self.rope:
            inv_freq = batch.memo[ROPE_KEY]
            out = rotary_attention(self.ops, batch, layer_id, q, k, v, inv_freq, self.scale,
                                   rotary_dim=2 * inv_freq.shape[0])
        else:
            out = paged_attention(self.ops, batch, layer_id, q, k, v, self.scale)
        return self.o_proj(out.reshape(q.shape[0], -1))


class RopeTable(nn.Module):
    """The model's RoPE frequencies as a buffer (derived from the config, never in a checkpoint)."""

    def __init__(self, cfg, head_dim: int):
        super().__init__()
        self.cfg, self.head_dim = cfg, head_dim
        self.register_buffer("inv_freq", inv_freq_for(cfg, head_dim), persistent=False)

    def refresh(self) -> None:
        """Built on the meta device the buffer is empty: compute it where the model now lives."""
        self.inv_freq = inv_freq_for(self.cfg, self.head_dim).to(self.inv_freq.device)

    def begin(self, batch) -> None:
        batch.memo[ROPE_KEY] = self.inv_freq
