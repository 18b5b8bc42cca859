"""Decoder-only transformers: Llama, Mistral, Qwen2, Qwen3 and Qwen3-MoE (one implementation,
per-family switches).

Per layer: h = h + attn(rmsnorm(h)); h = h + ffn(rmsnorm(h)), the ffn a SwiGLU MLP or, in
Qwen3-MoE's sparse layers, softmax-routed SwiGLU experts. Attention is GQA with RoPE; Qwen3 adds a
per-head RMSNorm on q and k before RoPE; Qwen2 has biases on q/k/v; Mistral (and Qwen with
use_sliding_window) can attend within a sliding window. Weights as transformers saves them:
`model.layers.N.self_attn.q_proj.weight`, `model.layers.N.mlp.experts.E.gate_proj.weight`, ...
"""

from __future__ import annotations

import re

import torch
import torch.nn.functional as F
from torch import nn

from .attention import paged_attention
from .base import CacheSpec, CausalLM, RMSNormWeight, linear
from .rope import inv_freq_for


def sliding_windows(cfg, model_type: str, num_layers: int) -> list[int | None]:
    """Per-layer attention window (None = full), as transformers applies it."""
    window = cfg.get("sliding_window")
    types = cfg.get("layer_types")
    if types:
        return [window if t == "sliding_attention" else None for t in types]
    if model_type == "mistral":
        return [window] * num_layers
    if model_type in ("qwen2", "qwen3") and cfg.get("use_sliding_window", False):
        first = cfg.get("max_window_layers", num_layers)
        return [window if i >= first else None for i in range(num_layers)]
    return [None] * num_layers


class SelfAttention(nn.Module):
    def __init__(self, cfg, model_type: str, layer_id: int, window: int | None, ops):
        super().__init__()
        self.layer_id, self.ops, self.window = layer_id, ops, window
        self.num_heads = cfg.num_attention_heads
        self.num_kv_heads = cfg.get("num_key_value_heads", self.num_heads)
        self.head_dim = cfg.get("head_dim") or cfg.hidden_size // self.num_heads
        self.scale = self.head_dim ** -0.5
        qkv_bias = True if model_type == "qwen2" else bool(cfg.get("attention_bias", False))
        o_bias = False if model_type == "qwen2" else bool(cfg.get("attention_bias", False))
        self.q_proj = linear(cfg.hidden_size, self.num_heads * self.head_dim, qkv_bias)
        self.k_proj = linear(cfg.hidden_size, self.num_kv_heads * self.head_dim, qkv_bias)
        self.v_proj = linear(cfg.hidden_size, self.num_kv_heads * self.head_dim, qkv_bias)
        self.o_proj = linear(self.num_heads * self.head_dim, cfg.hidden_size, o_bias)
        eps = cfg.get("rms_norm_eps", 1e-6)
        self.qk_norm = model_type in ("qwen3", "qwen3_moe")
        if self.qk_norm:
            self.q_norm = RMSNormWeight(self.head_dim, eps)
            self.k_norm = RMSNormWeight(self.head_dim, eps)

    def forward(self, hidden: torch.Tensor, batch, inv_freq: torch.Tensor) -> torch.Tensor:
        ops, T = self.ops, hidden.shape[0]
        q = self.q_proj(hidden).view(T, self.num_heads, self.head_dim)
        k = self.k_proj(hidden).view(T, self.num_kv_heads, self.head_dim)
        v = self.v_proj(hidden).view(T, self.num_kv_heads, self.head_dim)
        if self.qk_norm:
            q = ops.rms_norm(q, self.q_norm.weight, self.q_norm.eps)
            k = ops.rms_norm(k, self.k_norm.weight, self.k_norm.eps)
        q = ops.apply_rotary(q, batch.positions, inv_freq)
        k = ops.apply_rotary(k, batch.positions, inv_freq)
        out = paged_attention(ops, batch, self.layer_id, q, k, v, self.scale, self.window)
        return self.o_proj(out.reshape(T, -1))


class GatedMLP(nn.Module):
    def __init__(self, cfg, ops):
        super().__init__()
        self.ops = ops
        self.act = cfg.get("hidden_act", "silu")
        bias = bool(cfg.get("mlp_bias", False))
        self.gate_proj = linear(cfg.hidden_size, cfg.intermediate_size, bias)
        self.up_proj = linear(cfg.hidden_size, cfg.intermediate_size, bias)
        self.down_proj = linear(cfg.intermediate_size, cfg.hidden_size, bias)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.ops.mlp(hidden, self.up_proj.weight, self.down_proj.weight, self.gate_proj.weight, self.act,
                            self.up_proj.bias, self.down_proj.bias, self.gate_proj.bias)


class SparseMoE(nn.Module):
    """Qwen3-MoE's sparse block: softmax top-k routing over SwiGLU experts, no shared expert."""

    def __init__(self, cfg, ops):
        super().__init__()
        self.ops = ops
        self.top_k = cfg.num_experts_per_tok
        self.norm_topk_prob = bool(cfg.get("norm_topk_prob", False))
        self.act = cfg.get("hidden_act", "silu")
        E, I, H = num_experts(cfg), cfg.moe_intermediate_size, cfg.hidden_size
        self.gate = linear(H, E, False)
        self.experts = nn.Module()
        self.experts.gate_proj = nn.Parameter(torch.zeros(E, I, H), requires_grad=False)
        self.experts.up_proj = nn.Parameter(torch.zeros(E, I, H), requires_grad=False)
        self.experts.down_proj = nn.Parameter(torch.zeros(E, H, I), requires_grad=False)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        logits = F.linear(hidden, self.gate.weight)
        weights, ids = self.ops.route_softmax(logits, self.top_k, self.norm_topk_prob)
        # transformers rounds the routing weights to the model dtype before using them.
        weights = weights.to(logits.dtype)
        e = self.experts
        return self.ops.moe_experts(hidden, weights, ids, e.up_proj, e.down_proj, e.gate_proj, self.act)


def num_experts(cfg) -> int:
    """Hub configs say num_experts; transformers 5 saves num_local_experts."""
    return int(cfg.get("num_experts") or cfg.get("num_local_experts") or 0)


def is_sparse_layer(cfg, layer_id: int) -> bool:
    """Qwen3-MoE: experts in every `decoder_sparse_step`-th layer except those in mlp_only_layers."""
    if num_experts(cfg) <= 0 or layer_id in (cfg.get("mlp_only_layers") or []):
        return False
    return (layer_id + 1) % cfg.get("decoder_sparse_step", 1) == 0


class DecoderLayer(nn.Module):
    def __init__(self, cfg, model_type: str, layer_id: int, window, ops):
        super().__init__()
        self.ops = ops
        eps = cfg.get("rms_norm_eps", 1e-6)
        self.input_layernorm = RMSNormWeight(cfg.hidden_size, eps)
        self.self_attn = SelfAttention(cfg, model_type, layer_id, window, ops)
        self.post_attention_layernorm = RMSNormWeight(cfg.hidden_size, eps)
        sparse = model_type == "qwen3_moe" and is_sparse_layer(cfg, layer_id)
        self.mlp = SparseMoE(cfg, ops) if sparse else GatedMLP(cfg, ops)

    def forward(self, hidden, batch, inv_freq):
        n1, n2 = self.input_layernorm, self.post_attention_layernorm
        hidden = hidden + self.self_attn(self.ops.rms_norm(hidden, n1.weight, n1.eps), batch, inv_freq)
        return hidden + self.mlp(self.ops.rms_norm(hidden, n2.weight, n2.eps))


class DecoderStack(nn.Module):
    def __init__(self, cfg, model_type: str, ops):
        super().__init__()
        n = cfg.num_hidden_layers
        windows = sliding_windows(cfg, model_type, n)
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size).requires_grad_(False)
        self.layers = nn.ModuleList(DecoderLayer(cfg, model_type, i, windows[i], ops) for i in range(n))
        self.norm = RMSNormWeight(cfg.hidden_size, cfg.get("rms_norm_eps", 1e-6))


_EXPERT = re.compile(r"^(model\.layers\.\d+\.mlp\.experts)\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight$")


class LlamaForCausalLM(CausalLM):
    """Llama, Mistral, Qwen2, Qwen3 and Qwen3-MoE."""

    model_types = ("llama", "mistral", "qwen2", "qwen3", "qwen3_moe")

    def __init__(self, config: dict, ops):
        super().__init__(config, ops)
        cfg = self.config
        self.model_type = cfg.get("model_type", "llama")
        self.model = DecoderStack(cfg, self.model_type, ops)
        attn = self.model.layers[0].self_attn
        # A buffer, not a parameter: derived from the config, never in the checkpoint.
        self.register_buffer("inv_freq", inv_freq_for(cfg, attn.head_dim), persistent=False)
        self.lm_head = linear(cfg.hidden_size, cfg.vocab_size, False)
        self.tie_weights()

    @property
    def input_embedding(self):
        return self.model.embed_tokens

    def finish_loading(self) -> None:
        # Built on the meta device, the buffer was allocated empty: compute it where it now lives.
        self.inv_freq = inv_freq_for(self.config, self.model.layers[0].self_attn.head_dim).to(self.inv_freq.device)

    @property
    def cache_spec(self) -> CacheSpec:
        attn = self.model.layers[0].self_attn
        return CacheSpec(kv_layer_ids=tuple(range(len(self.model.layers))), num_kv_heads=attn.num_kv_heads,
                         head_dim=attn.head_dim)

    def map_weight_name(self, name: str):
        if name.endswith("rotary_emb.inv_freq") or (self.tied and name == "lm_head.weight"):
            return None
        m = _EXPERT.match(name)
        if m:  # experts one by one, as checkpoints hold them, into the stacked parameters
            return f"{m.group(1)}.{m.group(3)}", int(m.group(2))
        return name, None

    def forward(self, batch) -> torch.Tensor:
        hidden = self.model.embed_tokens(batch.input_ids)
        for layer in self.model.layers:
            hidden = layer(hidden, batch, self.inv_freq)
        last = batch.last_token_hidden(hidden)
        norm = self.model.norm
        return self.lm_head(self.ops.rms_norm(last, norm.weight, norm.eps)).float()
