"""Kimi-Linear: Kimi Delta Attention layers (kimi_delta_attention.py) with multi-head latent
attention every few layers (mla.py; no RoPE), an FFN after every mixer: a SwiGLU MLP on the first
`first_k_dense_replace` layers, then a sparse MoE of SwiGLU experts routed DeepSeek-V3 style
(sigmoid scores, a selection bias, grouped top-k, routed_scaling_factor) plus always-on shared
experts. Which layer is which comes from the layer map (core/families/kimi_linear.py, which reads
the config's 1-based `linear_attn_config.kda_layers` / `full_attn_layers`).

Weights as the checkpoint (and transformers' save) names them: `model.layers.N.self_attn...` for
both mixers, `mlp` for dense layers and `block_sparse_moe` for MoE ones (held here as `mlp`),
experts one by one (`experts.E.w1.weight`: w1 gate, w3 up, w2 down). The MLA layers' KV pool keeps
the compressed latent, one vector per token (CacheSpec.latent_kv).
"""

from __future__ import annotations

import dataclasses
import re

import torch
from torch import nn

from .base import linear
from .kimi_delta_attention import KimiDeltaAttention
from .mla import LatentAttention
from .qwen3_next import SwiGLU
from .stack import Layout, Parts, StackedCausalLM


def _first(cfg, *keys, default=None):
    for key in keys:
        if cfg.get(key) is not None:
            return cfg.get(key)
    return default


class KimiMoE(nn.Module):
    """Sigmoid-routed SwiGLU experts (grouped top-k, selection bias, scaled) plus shared experts."""

    def __init__(self, cfg, layer, ops):
        super().__init__()
        self.ops = ops
        moe = layer.moe
        E, I, H = moe.experts, moe.expert_intermediate, cfg.hidden_size
        act = cfg.get("moe_router_activation_func", "sigmoid")
        if act != "sigmoid":
            raise ValueError(f"moe_router_activation_func {act!r} is not supported; only 'sigmoid'")
        self.top_k = moe.top_k
        self.n_group, self.topk_group = moe.groups, moe.topk_groups  # 1, 1 without use_grouped_topk
        self.norm_topk_prob = bool(_first(cfg, "moe_renormalize", "norm_topk_prob", default=True))
        self.scaling = float(cfg.get("routed_scaling_factor", 1.0))
        self.gate = nn.Module()
        self.gate.weight = nn.Parameter(torch.zeros(E, H), requires_grad=False)
        self.gate.e_score_correction_bias = nn.Parameter(torch.zeros(E), requires_grad=False)
        self.experts = nn.Module()
        self.experts.gate_proj = nn.Parameter(torch.zeros(E, I, H), requires_grad=False)
        self.experts.up_proj = nn.Parameter(torch.zeros(E, I, H), requires_grad=False)
        self.experts.down_proj = nn.Parameter(torch.zeros(E, H, I), requires_grad=False)
        self.shared_experts = SwiGLU(cfg, ops, moe.shared_intermediate) if moe.shared_intermediate else None

    def forward(self, hidden: torch.Tensor):
        """(shared experts' output or None, routed output): the model's residual add takes the pair
        (stack.py), and sums a fused MoE's per-assignment parts [T, k, H] (ops.moe_gated_experts_unsummed)
        in its own launch. The router's logits in float32 (ops.router_logits: one launch at decode)."""
        logits = self.ops.router_logits(hidden, self.gate.weight)
        weights, ids = self.ops.route_sigmoid_grouped(logits, self.gate.e_score_correction_bias, self.top_k,
                                                      self.n_group, self.topk_group, self.norm_topk_prob, self.scaling)
        e = self.experts
        unsummed = getattr(self.ops, "moe_gated_experts_unsummed", None)
        if unsummed is not None:
            routed = unsummed(hidden, weights, ids, e.gate_proj, e.up_proj, e.down_proj, "silu")
        else:
            routed = self.ops.moe_experts(hidden, weights, ids, e.up_proj, e.down_proj, e.gate_proj, "silu")
        return (None if self.shared_experts is None else self.shared_experts(hidden), routed)


def kimi_delta_attention(cfg, layer, ops) -> KimiDeltaAttention:
    if cfg.get("hidden_act", "silu") != "silu":
        raise ValueError(f"hidden_act {cfg.hidden_act!r} is not supported for KDA; only 'silu'")
    return KimiDeltaAttention(cfg.hidden_size, layer, ops, eps=cfg.get("rms_norm_eps", 1e-5))


def latent_attention(cfg, layer, ops) -> LatentAttention:
    if cfg.get("mla_use_nope") is False:
        raise ValueError("mla_use_nope is false (RoPE in the MLA layers), which the engine's Kimi-Linear does not "
                         "implement; Kimi-Linear checkpoints set it true")
    return LatentAttention(cfg, layer, ops)


_EXPERT = re.compile(r"^(model\.layers\.\d+\.mlp\.experts)\.(\d+)\.(w1|w2|w3)\.weight$")
_TWIN_EXPERTS = re.compile(r"^(model\.layers\.\d+\.mlp)\.experts\.(gate_up_proj|down_proj)$")
_EXPERT_PARAM = {"w1": "gate_proj", "w3": "up_proj", "w2": "down_proj"}


class KimiLinearForCausalLM(StackedCausalLM):
    keep_float32 = ("mlp.gate.weight", "e_score_correction_bias", "dt_bias")  # as transformers keeps them
    parts = Parts(
        family="Kimi-Linear",
        mixers={"kimi_delta_attention": kimi_delta_attention, "attention": latent_attention},
        ffns={"mlp": lambda cfg, layer, ops: SwiGLU(cfg, ops, layer.mlp.intermediate), "moe": KimiMoE},
        layout=Layout(root="model", embed="embed_tokens", final_norm="norm",
                      mixer_names={"kimi_delta_attention": "self_attn", "attention": "self_attn"}, ffn_name="mlp",
                      mixer_norm="input_layernorm", ffn_norm="post_attention_layernorm", eps_default=1e-5),
    )

    @property
    def cache_spec(self):
        spec = super().cache_spec
        if not spec.kv_layer_ids:
            return spec
        attn = self.decoder.layers[spec.kv_layer_ids[0]].mixer_module
        return dataclasses.replace(spec, latent_kv=True, v_head_dim=attn.rank)

    def twin_tensor(self, name: str):
        """What transformers' in-memory tensor `name` holds (hf_twin.py) where its names are not the
        checkpoint's: the three short convs stacked (conv1d), the forget gate's own module, experts
        fused per layer (gate_up_proj [E, 2I, H], gate first; down_proj). None: the checkpoint's name."""
        params = dict(self.named_parameters())
        m = _TWIN_EXPERTS.match(name)
        if m:
            prefix = f"{m.group(1)}.experts."
            if m.group(2) == "down_proj":
                return params[prefix + "down_proj"]
            return torch.cat([params[prefix + "gate_proj"], params[prefix + "up_proj"]], dim=1)
        if name.endswith(".self_attn.conv1d.weight"):
            prefix = name[: -len("conv1d.weight")]
            return torch.cat([params[f"{prefix}{p}_conv1d.weight"] for p in "qkv"])
        if ".self_attn.forget_gate." in name:
            return params[name.replace(".forget_gate.", ".")]
        return None

    def map_weight_name(self, name: str):
        if self.tied and name == "lm_head.weight":
            return None
        name = name.replace(".block_sparse_moe.", ".mlp.")
        m = _EXPERT.match(name)
        if m:
            return f"{m.group(1)}.{_EXPERT_PARAM[m.group(3)]}", int(m.group(2))
        return name, None
