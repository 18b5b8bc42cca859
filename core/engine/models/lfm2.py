"""LFM2 (Liquid): gated short-conv blocks (short_conv.py) with GQA attention layers in between
(per-head RMSNorm on q and k, RoPE), a SwiGLU MLP after every mixer. Which layer is which comes
from the layer map (core/families/lfm2.py reads layer_types / full_attn_idxs). The final norm is
called `embedding_norm` in the checkpoint; the norms' epsilon is `norm_eps`.
"""

from __future__ import annotations

import torch
from torch import nn

from .attention import head_geometry, rotary_attention
from .base import RMSNormWeight, linear
from .fused_gate_up import FusedGateUp
from .fused_qkv import FusedQKV
from .rope import inv_freq_for
from .short_conv import ShortConv
from .stack import Layout, Parts, StackedCausalLM

ROPE_KEY = "rope_inv_freq"
# The checkpoint's `ffn_norm` is held as `ffn_layernorm`: a DecoderLayer keeps its norms' names in
# attributes called mixer_norm / ffn_norm, so a module may not take either name.
FFN_NORM = "ffn_layernorm"


class Lfm2Attention(FusedQKV, nn.Module):
    def __init__(self, cfg, layer, ops):
        super().__init__()
        self.layer_id, self.ops = layer.index, ops
        self.num_heads, self.num_kv_heads, self.head_dim = head_geometry(layer)
        self.scale = self.head_dim ** -0.5
        H, D = self.num_heads, self.head_dim
        self.q_proj = linear(cfg.hidden_size, H * D, False)
        self.k_proj = linear(cfg.hidden_size, self.num_kv_heads * D, False)
        self.v_proj = linear(cfg.hidden_size, self.num_kv_heads * D, False)
        self.out_proj = linear(H * D, cfg.hidden_size, False)
        eps = cfg.get("norm_eps", 1e-5)
        self.q_layernorm = RMSNormWeight(D, eps)
        self.k_layernorm = RMSNormWeight(D, eps)

    def forward(self, hidden: torch.Tensor, batch) -> torch.Tensor:
        ops, T = self.ops, hidden.shape[0]
        q, k, v = self.project_qkv(hidden)  # one GEMM on accelerators (fused_qkv.py)
        out = rotary_attention(ops, batch, self.layer_id, q, k, v, batch.memo[ROPE_KEY], self.scale,
                               q_norm=self.q_layernorm, k_norm=self.k_layernorm)
        return self.out_proj(out.reshape(T, -1))


class Lfm2MLP(FusedGateUp, nn.Module):
    """SwiGLU under LFM2's names: w1 (gate), w3 (up), w2 (down); width from the layer map. On
    accelerators gate and up run as one product (fused_gate_up.py)."""

    act = "silu"

    def __init__(self, cfg, layer, ops):
        super().__init__()
        self.ops = ops
        inter = layer.mlp.intermediate
        self.w1 = linear(cfg.hidden_size, inter, False)
        self.w3 = linear(cfg.hidden_size, inter, False)
        self.w2 = linear(inter, cfg.hidden_size, False)

    # FusedGateUp's names for the checkpoint's
    gate_proj = property(lambda self: self.w1)
    up_proj = property(lambda self: self.w3)
    down_proj = property(lambda self: self.w2)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.gated_mlp(hidden)


def short_conv(cfg, layer, ops) -> ShortConv:
    return ShortConv(cfg.hidden_size, layer, ops, bias=bool(cfg.get("conv_bias", False)))


class Lfm2ForCausalLM(StackedCausalLM):
    parts = Parts(
        family="LFM2",
        mixers={"short_conv": short_conv, "attention": Lfm2Attention},
        ffns={"mlp": Lfm2MLP},
        layout=Layout(root="model", embed="embed_tokens", final_norm="embedding_norm",
                      mixer_names={"short_conv": "conv", "attention": "self_attn"}, ffn_name="feed_forward",
                      mixer_norm="operator_norm", ffn_norm=FFN_NORM, eps_keys=("norm_eps",), eps_default=1e-5),
    )

    def __init__(self, config: dict, ops, layer_map):
        super().__init__(config, ops, layer_map)
        self.register_buffer("inv_freq", inv_freq_for(self.config, self._head_dim), persistent=False)

    @property
    def tied(self) -> bool:  # LFM2 ties by default; old configs say tie_embedding
        value = self.config.get("tie_word_embeddings", self.config.get("tie_embedding", True))
        return bool(value)

    @property
    def _head_dim(self) -> int:
        kv = self.layer_map.kv_layers
        return self.layer_map.layers[kv[0]].attention.head_dim if kv else 1

    def finish_loading(self) -> None:
        self.inv_freq = inv_freq_for(self.config, self._head_dim).to(self.inv_freq.device)

    def begin(self, batch) -> None:
        batch.memo[ROPE_KEY] = self.inv_freq

    def map_weight_name(self, name: str):
        if name.endswith("rotary_emb.inv_freq") or (self.tied and name == "lm_head.weight"):
            return None
        if name.endswith(".ffn_norm.weight"):
            name = name[: -len("ffn_norm.weight")] + FFN_NORM + ".weight"
        return name, None
