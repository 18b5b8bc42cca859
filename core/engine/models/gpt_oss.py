"""gpt-oss: sliding-window and full attention with per-head sinks, and a MoE in every layer.

- Attention: GQA with biases, YaRN RoPE (cos/sin scaled by its attention factor), one learnt
  "sink" logit per head that joins the softmax's denominator and attends to nothing. Sliding
  layers and their window come from the layer map (core/families/sliding.py).
- MoE: a biased router; top-k of the raw logits, softmax over the k chosen. Each expert runs a
  clamped SwiGLU on interleaved gate/up columns: gate = min(g, limit), up = clamp(u, -limit, limit),
  out = (up + 1) * gate * sigmoid(alpha * gate), then the down projection, with biases.
- RMSNorm multiplies the weight in float32 (`norm_in_float32`).
Weights as transformers saves them: experts stacked, `mlp.experts.gate_up_proj` [E, H, 2I] and
`mlp.experts.down_proj` [E, I, H] (x @ W layout), with `_bias` companions.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .attention import head_geometry, paged_attention, window_of
from .base import linear
from .rope import attention_factor, inv_freq_for
from .stack import Layout, Parts, StackedCausalLM

ROPE_KEY = "rope_inv_freq"


class GptOssAttention(nn.Module):
    def __init__(self, cfg, layer, ops):
        super().__init__()
        self.layer_id, self.ops = layer.index, ops
        self.window = window_of(layer)
        self.num_heads, self.num_kv_heads, self.head_dim = head_geometry(layer)
        self.scale = self.head_dim ** -0.5
        self.rope_scaling = attention_factor(cfg)
        bias = bool(cfg.get("attention_bias", True))
        H = cfg.hidden_size
        self.q_proj = linear(H, self.num_heads * self.head_dim, bias)
        self.k_proj = linear(H, self.num_kv_heads * self.head_dim, bias)
        self.v_proj = linear(H, self.num_kv_heads * self.head_dim, bias)
        self.o_proj = linear(self.num_heads * self.head_dim, H, bias)
        self.sinks = nn.Parameter(torch.zeros(self.num_heads), requires_grad=False)

    def forward(self, hidden: torch.Tensor, batch) -> torch.Tensor:
        ops, T = self.ops, hidden.shape[0]
        q = self.q_proj(hidden).view(T, self.num_heads, self.head_dim)
        k = self.k_proj(hidden).view(T, self.num_kv_heads, self.head_dim)
        v = self.v_proj(hidden).view(T, self.num_kv_heads, self.head_dim)
        inv_freq = batch.memo[ROPE_KEY]
        q = ops.apply_rotary(q, batch.positions, inv_freq, self.rope_scaling)
        k = ops.apply_rotary(k, batch.positions, inv_freq, self.rope_scaling)
        out = paged_attention(ops, batch, self.layer_id, q, k, v, self.scale, self.window, sinks=self.sinks)
        return self.o_proj(out.reshape(T, -1))


def clamped_swiglu_experts(x, ids, weights, gate_up, gate_up_bias, down, down_bias, alpha: float, limit: float):
    """x [T, H]; ids/weights [T, k]; gate_up [E, H, 2I] (gate and up interleaved), down [E, I, H].

    Tokens are sorted by expert and each expert that got any runs once on its rows (one matmul per
    expert hit, never a loop over tokens); outputs are weighted and summed back per token."""
    T, k = ids.shape
    flat = ids.reshape(-1)
    order = torch.argsort(flat, stable=True)
    token = order // k
    counts = torch.bincount(flat, minlength=gate_up.shape[0]).tolist()
    rows = x[token]
    out = torch.empty(rows.shape[0], down.shape[-1], dtype=x.dtype, device=x.device)
    start = 0
    for e, n in enumerate(counts):
        if n == 0:
            continue
        part = rows[start:start + n]
        gu = part @ gate_up[e] + gate_up_bias[e]
        gate, up = gu[..., ::2].clamp(max=limit), gu[..., 1::2].clamp(-limit, limit)
        act = (up + 1) * gate * torch.sigmoid(gate * alpha)
        out[start:start + n] = act @ down[e] + down_bias[e]
        start += n
    out = out * weights.reshape(-1)[order, None].to(out.dtype)
    return torch.zeros_like(x).index_add_(0, token, out)


class GptOssMoE(nn.Module):
    def __init__(self, cfg, layer, ops):
        super().__init__()
        moe = layer.moe
        E, H, I = moe.experts, cfg.hidden_size, moe.expert_intermediate
        self.top_k = moe.top_k
        self.alpha = float(cfg.get("swiglu_alpha", 1.702))
        self.limit = float(cfg.get("swiglu_limit", 7.0))
        self.router = linear(H, E, True)
        self.experts = nn.Module()
        for name, shape in (("gate_up_proj", (E, H, 2 * I)), ("gate_up_proj_bias", (E, 2 * I)),
                            ("down_proj", (E, I, H)), ("down_proj_bias", (E, H))):
            setattr(self.experts, name, nn.Parameter(torch.zeros(shape), requires_grad=False))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        # The router is held in float32 (keep_float32): its logits are computed there, whatever the model dtype.
        logits = F.linear(hidden.to(self.router.weight.dtype), self.router.weight, self.router.bias)
        top, ids = torch.topk(logits, self.top_k, dim=-1)
        weights = torch.softmax(top, dim=-1)
        e = self.experts
        return clamped_swiglu_experts(hidden, ids, weights, e.gate_up_proj, e.gate_up_proj_bias, e.down_proj,
                                      e.down_proj_bias, self.alpha, self.limit)


class GptOssForCausalLM(StackedCausalLM):
    model_types = ("gpt_oss",)
    keep_float32 = ("router",)
    parts = Parts(
        family="gpt-oss",
        mixers={"attention": GptOssAttention, "sliding_attention": GptOssAttention},
        ffns={"moe": GptOssMoE},
        layout=Layout(root="model", embed="embed_tokens", final_norm="norm",
                      mixer_names={"attention": "self_attn", "sliding_attention": "self_attn"}, ffn_name="mlp",
                      mixer_norm="input_layernorm", ffn_norm="post_attention_layernorm", norm_in_float32=True),
    )

    def __init__(self, config: dict, ops, layer_map):
        super().__init__(config, ops, layer_map)
        self.register_buffer("inv_freq", inv_freq_for(self.config, self._head_dim), persistent=False)

    @property
    def _head_dim(self) -> int:
        return self.decoder.layers[0].mixer_module.head_dim

    def finish_loading(self) -> None:
        self.inv_freq = inv_freq_for(self.config, self._head_dim).to(self.inv_freq.device)

    def begin(self, batch) -> None:
        batch.memo[ROPE_KEY] = self.inv_freq

    def map_weight_name(self, name: str):
        if name.endswith("rotary_emb.inv_freq") or (self.tied and name == "lm_head.weight"):
            return None
        return name, None
