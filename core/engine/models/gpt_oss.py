"""gpt-oss: sliding-window and full attention with per-head sinks, and a MoE in every layer.

- Attention: GQA with biases, YaRN RoPE (cos/sin scaled by its attention factor), one learnt
  "sink" logit per head that joins the softmax's denominator and attends to nothing. Sliding
  layers and their window come from the layer map (core/families/sliding.py).
- MoE: a biased router; top-k of the raw logits, softmax over the k chosen (ops.router_topk_softmax).
  Each expert runs a clamped SwiGLU on interleaved gate/up columns: gate = min(g, limit),
  up = clamp(u, -limit, limit), out = (up + 1) * gate * sigmoid(alpha * gate), then the down
  projection, with biases (ops.moe_gated_experts: one fused kernel chain on a GPU, no host read).
- RMSNorm multiplies the weight in float32 (`norm_in_float32`).
Weights as transformers saves them: experts stacked, `mlp.experts.gate_up_proj` [E, H, 2I] and
`mlp.experts.down_proj` [E, I, H] (x @ W layout), with `_bias` companions.
"""

from __future__ import annotations

import torch
from torch import nn

from .attention import head_geometry, rotary_attention, window_of
from .base import linear
from .fused_qkv import FusedQKV
from .rope import attention_factor, inv_freq_for
from .stack import Layout, Parts, StackedCausalLM

ROPE_KEY = "rope_inv_freq"


class GptOssAttention(FusedQKV, nn.Module):
    # o_proj through ops.linear where the device registers a fast one (kernels/triton/dense_gemv.py: one
    # launch at decode sizes, where cuBLAS ran a split-K GEMV and a reduction); off until the H200 times
    # the whole step both ways (bench/families.py --o-proj gemv|cublas).
    o_proj_gemv = False

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
        q, k, v = self.project_qkv(hidden)  # one GEMM on accelerators (fused_qkv.py)
        inv_freq = batch.memo[ROPE_KEY]
        out = rotary_attention(ops, batch, self.layer_id, q, k, v, inv_freq, self.scale, self.window,
                               scaling=self.rope_scaling, sinks=self.sinks)
        if self.o_proj_gemv and getattr(ops, "implementations", {}).get("linear", "reference") != "reference":
            return ops.linear(out.reshape(T, -1), self.o_proj.weight, self.o_proj.bias)
        return self.o_proj(out.reshape(T, -1))


class GptOssMoE(nn.Module):
    def __init__(self, cfg, layer, ops):
        super().__init__()
        moe = layer.moe
        E, H, I = moe.experts, cfg.hidden_size, moe.expert_intermediate
        self.ops, self.top_k = ops, moe.top_k
        self.alpha = float(cfg.get("swiglu_alpha", 1.702))
        self.limit = float(cfg.get("swiglu_limit", 7.0))
        self.router = linear(H, E, True)
        self.experts = nn.Module()
        for name, shape in (("gate_up_proj", (E, H, 2 * I)), ("gate_up_proj_bias", (E, 2 * I)),
                            ("down_proj", (E, I, H)), ("down_proj_bias", (E, H))):
            setattr(self.experts, name, nn.Parameter(torch.zeros(shape), requires_grad=False))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        # The router is held in float32 (keep_float32): its logits are computed there, whatever the model dtype.
        weights, ids = self.ops.router_topk_softmax(hidden, self.router.weight, self.router.bias, self.top_k)
        e = self.experts
        gu, gub = e.gate_up_proj, e.gate_up_proj_bias
        # Views, not copies: the interleaved gate and up columns as [E, I, H], down as [E, H, I].
        # A fused MoE leaves the sum over k to the next residual add ((no shared part, routed [T, k, H])).
        unsummed = getattr(self.ops, "moe_gated_experts_unsummed", None)
        out = (unsummed or self.ops.moe_gated_experts)(hidden, weights, ids, gu[..., ::2].transpose(1, 2),
                                                       gu[..., 1::2].transpose(1, 2), e.down_proj.transpose(1, 2),
                                                       "swiglu_clamped", gub[:, ::2], gub[:, 1::2], e.down_proj_bias,
                                                       self.alpha, self.limit)
        return (None, out) if unsummed is not None else out


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
