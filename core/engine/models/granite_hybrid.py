"""Granite-4.0-H (`granitemoehybrid`) and Bamba: Mamba2 layers with a few attention layers, every
layer followed by an FFN.

Which layer is Mamba2 and which attention comes from the layer map (core/families/granite_hybrid.py).
- Bamba: attention with RoPE over half of each head, a SwiGLU `feed_forward`, no multipliers.
- Granite: attention without RoPE (unless position_embedding_type is "rope") scaled by
  attention_multiplier; each layer's FFN is its `shared_mlp` (SwiGLU, gate and up stored fused in
  `input_linear`), plus a softmax-routed `block_sparse_moe` when num_local_experts > 0 (the map's
  "moe"). Its muP multipliers: embeddings times embedding_multiplier, each residual branch times
  residual_multiplier, logits divided by logits_scaling.
Weights as transformers saves them (`model.layers.N.mamba...`, `...block_sparse_moe.input_linear.weight`
[E, 2I, H]); Granite's two FFN parts live in one module here (`ffn.shared_mlp`, `ffn.block_sparse_moe`).
"""

from __future__ import annotations

import re

import torch
import torch.nn.functional as F
from torch import nn

from .base import linear
from .hybrid_attention import HybridAttention, RopeTable
from .llama import GatedMLP
from .mamba2 import Mamba2Mixer, time_step_limit
from .stack import DecoderLayer, Layout, Parts, StackedCausalLM


def bamba_mamba2(cfg, layer, ops) -> Mamba2Mixer:
    """The Mamba2 settings Bamba and Granite spell mamba_* (the geometry comes from the layer map)."""
    act = cfg.get("hidden_act", "silu")
    if act != "silu":
        raise ValueError(f"{cfg.get('model_type')} hidden_act {act!r} is not supported by the Mamba2 kernels; only 'silu'")
    return Mamba2Mixer(cfg.hidden_size, layer, ops, eps=cfg.get("rms_norm_eps", 1e-6), dt_limit=time_step_limit(cfg),
                       proj_bias=bool(cfg.get("mamba_proj_bias", False)),
                       conv_bias=bool(cfg.get("mamba_conv_bias", True)))


def uses_rope(cfg) -> bool:
    if cfg.get("model_type") == "bamba":
        return True
    return cfg.get("position_embedding_type") == "rope"


def hybrid_attention(cfg, layer, ops) -> HybridAttention:
    scale = cfg.get("attention_multiplier") if cfg.get("model_type") == "granitemoehybrid" else None
    return HybridAttention(cfg, layer, ops, scale=scale, rope=uses_rope(cfg))


class SharedMLP(nn.Module):
    """Granite's SwiGLU: input_linear holds gate then up, [2I, H]."""

    def __init__(self, cfg, ops, size: int):
        super().__init__()
        self.ops, self.act, self.size = ops, cfg.get("hidden_act", "silu"), size
        self.input_linear = linear(cfg.hidden_size, 2 * self.size, False)
        self.output_linear = linear(self.size, cfg.hidden_size, False)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        gate, up = self.input_linear.weight.split(self.size)
        return self.ops.mlp(hidden, up, self.output_linear.weight, gate, self.act)


class GraniteMoE(nn.Module):
    """Softmax over the top-k router logits (= softmax over all, renormalised over the top k);
    experts stacked as saved: input_linear [E, 2I, H] (gate, up), output_linear [E, H, I]."""

    def __init__(self, cfg, layer, ops):
        super().__init__()
        moe = layer.moe
        self.ops, self.act, self.top_k = ops, cfg.get("hidden_act", "silu"), moe.top_k
        E, I, H = moe.experts, moe.expert_intermediate, int(cfg.hidden_size)
        self.size = I
        self.router = nn.Module()
        self.router.layer = linear(H, E, False)
        self.input_linear = nn.Parameter(torch.zeros(E, 2 * I, H), requires_grad=False)
        self.output_linear = nn.Parameter(torch.zeros(E, H, I), requires_grad=False)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        logits = F.linear(hidden, self.router.layer.weight)
        weights, ids = self.ops.route_softmax(logits, self.top_k, True)
        weights = weights.to(hidden.dtype)  # transformers rounds the routing weights to the model dtype
        gate, up = self.input_linear[:, :self.size], self.input_linear[:, self.size:]
        return self.ops.moe_experts(hidden, weights, ids, up, self.output_linear, gate, self.act)


class GraniteFFN(nn.Module):
    """The shared MLP, plus the routed experts in a "moe" layer (the map's moe: its shared width is the MLP's)."""

    def __init__(self, cfg, layer, ops):
        super().__init__()
        moe = layer.moe if layer.ffn == "moe" else None
        self.shared_mlp = SharedMLP(cfg, ops, moe.shared_intermediate if moe else layer.mlp.intermediate)
        self.block_sparse_moe = GraniteMoE(cfg, layer, ops) if moe else None

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        out = self.shared_mlp(hidden)
        return out if self.block_sparse_moe is None else out + self.block_sparse_moe(hidden)


class ScaledResidualLayer(DecoderLayer):
    """Granite: h = h + m * mixer(norm(h)); h = h + m * ffn(norm(h)), m = residual_multiplier (the
    stack's part factors, so the add still runs fused with the next norm)."""

    def __init__(self, cfg, layer, parts, ops):
        super().__init__(cfg, layer, parts, ops)
        m = float(cfg.get("residual_multiplier", 1.0))
        self.factors = {"mixer": (1.0, m), "ffn": (1.0, m)}


class _HybridLM(StackedCausalLM):
    def __init__(self, config: dict, ops, layer_map):
        super().__init__(config, ops, layer_map)
        kv = layer_map.kv_layers
        self.rope = RopeTable(self.config, self.decoder.layers[kv[0]].mixer_module.head_dim) \
            if kv and uses_rope(self.config) else None

    def finish_loading(self) -> None:
        if self.rope is not None:
            self.rope.refresh()

    def begin(self, batch) -> None:
        if self.rope is not None:
            self.rope.begin(batch)


_LAYOUT = dict(root="model", embed="embed_tokens", mixer_names={"mamba2": "mamba", "attention": "self_attn"},
               mixer_norm="input_layernorm")


class BambaForCausalLM(_HybridLM):
    parts = Parts(
        family="Bamba",
        mixers={"mamba2": bamba_mamba2, "attention": hybrid_attention},
        ffns={"mlp": GatedMLP},
        layout=Layout(final_norm="final_layernorm", ffn_name="feed_forward", ffn_norm="pre_ff_layernorm", **_LAYOUT),
    )

    def map_weight_name(self, name: str):
        if self.tied and name == "lm_head.weight":
            return None
        return name, None


_GRANITE_FFN = re.compile(r"^(model\.layers\.\d+)\.(shared_mlp|block_sparse_moe)\.")


class GraniteMoeHybridForCausalLM(_HybridLM):
    layer_class = ScaledResidualLayer
    parts = Parts(
        family="GraniteMoeHybrid",
        mixers={"mamba2": bamba_mamba2, "attention": hybrid_attention},
        ffns={"mlp": GraniteFFN, "moe": GraniteFFN},
        layout=Layout(final_norm="norm", ffn_name="ffn", ffn_norm="post_attention_layernorm", **_LAYOUT),
    )

    def __init__(self, config: dict, ops, layer_map):
        super().__init__(config, ops, layer_map)
        self.embed_scale = float(self.config.get("embedding_multiplier", 1.0))
        self.logit_scale = 1.0 / float(self.config.get("logits_scaling", 1.0))

    def map_weight_name(self, name: str):
        if self.tied and name == "lm_head.weight":
            return None
        name = _GRANITE_FFN.sub(r"\1.ffn.\2.", name)
        if name.endswith("block_sparse_moe.input_linear.weight") or name.endswith("block_sparse_moe.output_linear.weight"):
            name = name[: -len(".weight")]  # the stacked experts are plain parameters here
        return name, None
