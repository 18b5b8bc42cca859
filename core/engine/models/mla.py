"""Multi-head latent attention (MLA, DeepSeek-V2 style) over a KV pool that stores the latent.

Per token the pool keeps one vector: the compressed KV latent c (kv_lora_rank, after its RMSNorm)
and the shared rope key k_r (qk_rope_head_dim): `[c | k_r]`, one "KV head". The per-head keys and
values are never materialised: kv_b_proj splits into W_UK (latent -> each head's no-rope key) and
W_UV (latent -> each head's value), and
    q_h . k_h(j) = (W_UK_h^T q_nope_h) . c_j + q_rope_h . k_r(j)       (W_UK absorbed into the query)
    o_h = sum_j p_hj W_UV_h c_j = W_UV_h (sum_j p_hj c_j)              (W_UV applied after attention)
so attention runs over the stored vectors as keys *and* values (the pool's `v` is its `k`), and the
first kv_lora_rank channels of its output are the attended latent. The softmax scale stays that of
the full head, (qk_nope_head_dim + qk_rope_head_dim)^-0.5.

Kimi-Linear's MLA uses no RoPE at all (`mla_use_nope`): the rope part of the key is there, unrotated.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .attention import paged_attention
from .base import RMSNormWeight, linear
from .fused_linears import can_stack, fusing, stacked
from .fused_qkv import FusedQKV

LATENT_NORM_EPS = 1e-6  # kv_a_layernorm / q_a_layernorm are built without the config's eps


class LatentAttention(nn.Module):
    num_kv_heads = 1  # what the pool holds per token: one latent vector

    def __init__(self, cfg, layer, ops):
        super().__init__()
        a, latent = layer.attention, layer.attention.latent
        self.layer_id, self.ops = layer.index, ops
        self.num_heads = a.heads
        self.rank, self.rope = latent.kv_lora_rank, latent.qk_rope_head_dim
        self.nope = a.head_dim - self.rope
        self.v_dim = a.v_head_dim
        self.head_dim = self.rank + self.rope  # the pool's vector
        self.scale = (self.nope + self.rope) ** -0.5
        H, qk, hidden = self.num_heads, self.nope + self.rope, cfg.hidden_size
        bias = bool(cfg.get("attention_bias", False))
        self.q_lora_rank = latent.q_lora_rank
        if self.q_lora_rank:
            self.q_a_proj = linear(hidden, self.q_lora_rank, bias)
            self.q_a_layernorm = RMSNormWeight(self.q_lora_rank, LATENT_NORM_EPS)
            self.q_b_proj = linear(self.q_lora_rank, H * qk, False)
        else:
            self.q_proj = linear(hidden, H * qk, False)
        self.kv_a_proj_with_mqa = linear(hidden, self.rank + self.rope, bias)
        self.kv_a_layernorm = RMSNormWeight(self.rank, LATENT_NORM_EPS)
        self.kv_b_proj = linear(self.rank, H * (self.nope + self.v_dim), False)
        self.o_proj = linear(H * self.v_dim, hidden, bias)

    def _project(self, hidden: torch.Tensor):
        """(the query [T, H * qk], the latent and rope key [T, rank + rope]): where the device stacks q/k/v
        (FusedQKV.fuse_qkv), the two products that read hidden are one GEMM over their stacked weights."""
        first = self.q_a_proj if self.q_lora_rank else self.q_proj
        parts = (first, self.kv_a_proj_with_mqa)
        if fusing(FusedQKV.fuse_qkv, hidden) and can_stack(parts):
            weight, bias = stacked(self, "in_proj", parts)
            q, kv = F.linear(hidden, weight, bias).split([p.weight.shape[0] for p in parts], dim=-1)
        else:
            q, kv = first(hidden), self.kv_a_proj_with_mqa(hidden)
        if self.q_lora_rank:
            n = self.q_a_layernorm
            q = self.q_b_proj(self.ops.rms_norm(q, n.weight, n.eps))
        return q, kv

    def forward(self, hidden: torch.Tensor, batch) -> torch.Tensor:
        ops, T, H = self.ops, hidden.shape[0], self.num_heads
        query, compressed = self._project(hidden)
        q_nope, q_rope = query.reshape(T, H, -1).split([self.nope, self.rope], dim=-1)
        latent, k_rope = compressed.split([self.rank, self.rope], dim=-1)
        latent = ops.rms_norm(latent, self.kv_a_layernorm.weight, self.kv_a_layernorm.eps)
        w = self.kv_b_proj.weight.view(H, self.nope + self.v_dim, self.rank)
        w_uk, w_uv = w[:, :self.nope], w[:, self.nope:]
        q = torch.cat([torch.einsum("thn,hnr->thr", q_nope, w_uk), q_rope], dim=-1)  # [T, H, rank + rope]
        kv = torch.cat([latent, k_rope], dim=-1)[:, None, :]  # [T, 1, rank + rope]
        out = paged_attention(ops, batch, self.layer_id, q, kv, kv, self.scale)[..., :self.rank]
        out = torch.einsum("thr,hvr->thv", out, w_uv)
        return self.o_proj(out.reshape(T, H * self.v_dim))
