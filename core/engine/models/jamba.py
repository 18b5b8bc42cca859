"""Jamba: Mamba (v1) layers with attention every attn_layer_period layers, and a softmax-routed MoE
of SwiGLU experts in place of the MLP every expert_layer_period layers. Which layer is which comes
from the layer map (core/families/jamba.py). Attention has no positional embedding (the Mamba layers
order the tokens). Routing: top-k of the softmax over all experts, weights not renormalised.
Weights as transformers saves them: `model.layers.N.mamba...`, `model.layers.N.self_attn...`,
`model.layers.N.feed_forward.experts.E.{gate,up,down}_proj.weight`, `...feed_forward.router.weight`.

Prompts scan with `selective_scan_varlen`: on CUDA/XPU the Triton kernel (kernels/triton/selective_scan.py,
the state held in registers across the prompt), elsewhere the chunked plain-torch op (a cumulative sum
per chunk of tokens, no step per token); decode steps with one batched state update on the pool's
slots (`selective_state_update_inplace`: in place in Triton, gather/scatter in the reference).
"""

from __future__ import annotations

import re

import torch
import torch.nn.functional as F
from torch import nn

from .hybrid_attention import HybridAttention
from .llama import GatedMLP
from .mamba import MambaMixer
from .routed_experts import swiglu_experts
from .stack import Layout, Parts, StackedCausalLM


def jamba_mamba(cfg, layer, ops) -> MambaMixer:
    if cfg.get("hidden_act", "silu") != "silu":
        raise ValueError(f"Jamba hidden_act {cfg.hidden_act!r} is not supported by the Mamba kernels; only 'silu'")
    return MambaMixer(cfg.hidden_size, layer, ops, eps=cfg.get("rms_norm_eps", 1e-6),
                      proj_bias=bool(cfg.get("mamba_proj_bias", False)), conv_bias=bool(cfg.get("mamba_conv_bias", True)))


class JambaMoE(nn.Module):
    def __init__(self, cfg, layer, ops):
        super().__init__()
        moe = layer.moe
        self.ops, self.act, self.top_k = ops, cfg.get("hidden_act", "silu"), moe.top_k
        E, I, H = moe.experts, moe.expert_intermediate, int(cfg.hidden_size)
        self.router = nn.Module()
        self.router.weight = nn.Parameter(torch.zeros(E, H), requires_grad=False)
        self.experts = nn.Module()
        self.experts.gate_proj = nn.Parameter(torch.zeros(E, I, H), requires_grad=False)
        self.experts.up_proj = nn.Parameter(torch.zeros(E, I, H), requires_grad=False)
        self.experts.down_proj = nn.Parameter(torch.zeros(E, H, I), requires_grad=False)

    def forward(self, hidden: torch.Tensor):
        """The experts' output [T, H]; where the device has the fused gated MoE's unsummed form, (None, its
        per-assignment parts [T, k, H]) instead, summed by the next residual add's launch (stack.py)."""
        # softmax in float32, the weights rounded to the model's dtype (inside the router's launch), as transformers
        weights, ids = self.ops.route_softmax(F.linear(hidden, self.router.weight), self.top_k, False, hidden.dtype)
        e = self.experts
        if self.act == "silu":
            return swiglu_experts(self.ops, hidden, weights, ids, e.gate_proj, e.up_proj, e.down_proj)
        return self.ops.moe_experts(hidden, weights, ids, e.up_proj, e.down_proj, e.gate_proj, self.act)


_EXPERT = re.compile(r"^(model\.layers\.\d+\.feed_forward\.experts)\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight$")


class JambaForCausalLM(StackedCausalLM):
    parts = Parts(
        family="Jamba",
        mixers={"mamba": jamba_mamba, "attention": lambda cfg, layer, ops: HybridAttention(cfg, layer, ops, rope=False)},
        ffns={"mlp": GatedMLP, "moe": JambaMoE},
        layout=Layout(root="model", embed="embed_tokens", final_norm="final_layernorm",
                      mixer_names={"mamba": "mamba", "attention": "self_attn"}, ffn_name="feed_forward",
                      mixer_norm="input_layernorm", ffn_norm="pre_ff_layernorm"),
    )

    def map_weight_name(self, name: str):
        if self.tied and name == "lm_head.weight":
            return None
        m = _EXPERT.match(name)
        if m:
            return f"{m.group(1)}.{m.group(3)}", int(m.group(2))
        return name, None
