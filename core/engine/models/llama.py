"""Decoder-only transformers: Llama, Mistral, Qwen2, Qwen3 and Qwen3-MoE (one implementation,
per-family switches).

Per layer: h = h + attn(rmsnorm(h)); h = h + ffn(rmsnorm(h)), the ffn a SwiGLU MLP or, in
Qwen3-MoE's sparse layers, softmax-routed SwiGLU experts. Attention is GQA with RoPE; Qwen3 adds a
per-head RMSNorm on q and k before RoPE; Qwen2 has biases on q/k/v. Which layers slide (Mistral,
Qwen with use_sliding_window, layer_types) and which FFNs are sparse come from the layer map
(core/families/dense.py): (attention | sliding_attention, mlp | moe) per layer. Weights as transformers saves them:
`model.layers.N.self_attn.q_proj.weight`, `model.layers.N.mlp.experts.E.gate_proj.weight`, ...
"""

from __future__ import annotations

import re

import torch
import torch.nn.functional as F
from torch import nn


from .attention import head_geometry, rotary_attention, window_of
from .base import RMSNormWeight, linear
from .fused_gate_up import FusedGateUp
from .fused_qkv import FusedQKV
from .rope import inv_freq_for
from .stack import Layout, Parts, StackedCausalLM

ROPE_KEY = "rope_inv_freq"  # batch.memo key: the model's RoPE table, shared by its attention layers


class SelfAttention(FusedQKV, nn.Module):
    """GQA with RoPE; a "sliding_attention" layer of the map attends within its window (the map's)."""

    def __init__(self, cfg, layer, ops):
        super().__init__()
        model_type = cfg.get("model_type", "llama")
        self.layer_id, self.ops = layer.index, ops
        self.window = window_of(layer)
        self.num_heads, self.num_kv_heads, self.head_dim = head_geometry(layer)
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

    def forward(self, hidden: torch.Tensor, batch) -> torch.Tensor:
        ops, T = self.ops, hidden.shape[0]
        inv_freq = batch.memo[ROPE_KEY]
        q, k, v = self.project_qkv(hidden)  # one GEMM on accelerators (fused_qkv.py)
        norms = (self.q_norm, self.k_norm) if self.qk_norm else (None, None)
        out = rotary_attention(ops, batch, self.layer_id, q, k, v, inv_freq, self.scale, self.window,
                               q_norm=norms[0], k_norm=norms[1])
        return self.o_proj(out.reshape(T, -1))


class GatedMLP(FusedGateUp, nn.Module):
    """SwiGLU (or the config's activation) at the width the layer map gives the layer's MLP (gate and
    up as one product on accelerators: fused_gate_up.py)."""

    def __init__(self, cfg, layer, ops):
        super().__init__()
        self.ops = ops
        self.act = cfg.get("hidden_act", "silu")
        bias = bool(cfg.get("mlp_bias", False))
        inter = layer.mlp.intermediate
        self.gate_proj = linear(cfg.hidden_size, inter, bias)
        self.up_proj = linear(cfg.hidden_size, inter, bias)
        self.down_proj = linear(inter, cfg.hidden_size, bias)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.gated_mlp(hidden)


class SparseMoE(nn.Module):
    """Qwen3-MoE's sparse block: softmax top-k routing over SwiGLU experts, no shared expert."""

    def __init__(self, cfg, layer, ops):
        super().__init__()
        self.ops = ops
        moe = layer.moe
        self.top_k = moe.top_k
        self.norm_topk_prob = bool(cfg.get("norm_topk_prob", False))
        self.act = cfg.get("hidden_act", "silu")
        E, I, H = moe.experts, moe.expert_intermediate, cfg.hidden_size
        self.gate = linear(H, E, False)
        self.experts = nn.Module()
        self.experts.gate_proj = nn.Parameter(torch.zeros(E, I, H), requires_grad=False)
        self.experts.up_proj = nn.Parameter(torch.zeros(E, I, H), requires_grad=False)
        self.experts.down_proj = nn.Parameter(torch.zeros(E, H, I), requires_grad=False)
        # A fused gated MoE (the GPU's Triton chain: no host read, graph-safe) where the device has one;
        # elsewhere the generic experts op, whose CPU form is that device's own.
        fast = getattr(ops, "implementations", {}).get("moe_gated_experts", "reference") != "reference"
        self.gated = fast and self.act == "silu"

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        logits = F.linear(hidden, self.gate.weight)
        # transformers rounds the routing weights to the model dtype before using them (in the router's launch).
        weights, ids = self.ops.route_softmax(logits, self.top_k, self.norm_topk_prob, logits.dtype)
        e = self.experts
        if self.gated:  # the sum over k left to the next residual add where the fused MoE can
            unsummed = getattr(self.ops, "moe_gated_experts_unsummed", None)
            if unsummed is not None:
                return (None, unsummed(hidden, weights, ids, e.gate_proj, e.up_proj, e.down_proj, "silu"))
            return self.ops.moe_gated_experts(hidden, weights, ids, e.gate_proj, e.up_proj, e.down_proj, "silu")
        return self.ops.moe_experts(hidden, weights, ids, e.up_proj, e.down_proj, e.gate_proj, self.act)


_EXPERT = re.compile(r"^(model\.layers\.\d+\.mlp\.experts)\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight$")


class LlamaForCausalLM(StackedCausalLM):
    """Llama, Mistral, Qwen2, Qwen3 and Qwen3-MoE."""

    model_types = ("llama", "mistral", "qwen2", "qwen3", "qwen3_moe")
    parts = Parts(
        family="Llama",
        mixers={"attention": SelfAttention, "sliding_attention": SelfAttention},
        ffns={"mlp": GatedMLP, "moe": SparseMoE},
        layout=Layout(root="model", embed="embed_tokens", final_norm="norm",
                      mixer_names={"attention": "self_attn", "sliding_attention": "self_attn"}, ffn_name="mlp",
                      mixer_norm="input_layernorm", ffn_norm="post_attention_layernorm"),
    )

    def __init__(self, config: dict, ops, layer_map):
        super().__init__(config, ops, layer_map)
        # A buffer, not a parameter: derived from the config, never in the checkpoint.
        self.register_buffer("inv_freq", inv_freq_for(self.config, self._head_dim), persistent=False)

    @property
    def _head_dim(self) -> int:
        return self.decoder.layers[0].mixer_module.head_dim

    def finish_loading(self) -> None:
        # Built on the meta device, the buffer was allocated empty: compute it where it now lives.
        self.inv_freq = inv_freq_for(self.config, self._head_dim).to(self.inv_freq.device)

    def begin(self, batch) -> None:
        batch.memo[ROPE_KEY] = self.inv_freq  # every attention layer rotates with the same table

    def map_weight_name(self, name: str):
        if name.endswith("rotary_emb.inv_freq") or (self.tied and name == "lm_head.weight"):
            return None
        m = _EXPERT.match(name)
        if m:  # experts one by one, as checkpoints hold them, into the stacked parameters
            return f"{m.group(1)}.{m.group(3)}", int(m.group(2))
        return name, None
