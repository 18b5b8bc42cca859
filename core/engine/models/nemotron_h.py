"""NemotronH (Nemotron-H, Nemotron-3-Nano): a stack of single-purpose blocks.

Each block is `h = h + mixer(rmsnorm(h))` where the mixer is one of: Mamba2 (mamba2.py), GQA
attention without rotary embeddings, a relu2 MLP, or a MoE of relu2 experts with a shared expert and
DeepSeek-style grouped sigmoid routing. Which block is which comes from the layer map
(core/families/nemotron_h.py reads hybrid_override_pattern / layers_block_type); here a map entry
(mamba2, none) or (attention, none) is a mixer block, (none, mlp) or (none, moe) an FFN block.
Weights are named as NVIDIA's checkpoints and transformers' save_pretrained name them:
`backbone.layers.N.mixer...`, experts one by one (`mixer.experts.E.up_proj.weight`).
"""

from __future__ import annotations

import re

import torch
from torch import nn

from bringup.core.engine.quantized import Fp8Linear, is_quantized, map_expert_scale
from bringup.kernels.reference.mlp import activation

from .attention import head_geometry, paged_attention
from .base import linear
from .fused_qkv import FusedQKV
from .mamba2 import Mamba2Mixer, time_step_limit
from .stack import Layout, Parts, StackedCausalLM


def mamba2_mixer(cfg, layer, ops) -> Mamba2Mixer:
    """NemotronH's Mamba2 settings under its config keys (the geometry comes from the layer map)."""
    if cfg.get("mamba_hidden_act", "silu") != "silu":
        raise ValueError(f"NemotronH mamba_hidden_act {cfg.mamba_hidden_act!r} is not supported; only 'silu'")
    return Mamba2Mixer(cfg.hidden_size, layer, ops, eps=cfg.get("layer_norm_epsilon", 1e-5), dt_limit=time_step_limit(cfg),
                       proj_bias=bool(cfg.get("use_bias", False)), conv_bias=bool(cfg.get("use_conv_bias", True)))


class Attention(FusedQKV, nn.Module):
    """GQA attention; NemotronH uses no positional embedding in attention (the Mamba layers order tokens)."""

    def __init__(self, cfg, layer, ops):
        super().__init__()
        self.layer_id, self.ops = layer.index, ops
        self.num_heads, self.num_kv_heads, self.head_dim = head_geometry(layer)
        self.scale = self.head_dim ** -0.5
        bias = bool(cfg.get("attention_bias", False))
        self.q_proj = linear(cfg.hidden_size, self.num_heads * self.head_dim, bias)
        self.k_proj = linear(cfg.hidden_size, self.num_kv_heads * self.head_dim, bias)
        self.v_proj = linear(cfg.hidden_size, self.num_kv_heads * self.head_dim, bias)
        self.o_proj = linear(self.num_heads * self.head_dim, cfg.hidden_size, bias)
        self.sliding_window = cfg.get("sliding_window")

    def forward(self, hidden: torch.Tensor, batch) -> torch.Tensor:
        T = hidden.shape[0]
        q, k, v = self.project_qkv(hidden)  # one GEMM on accelerators (fused_qkv.py)
        out = paged_attention(self.ops, batch, self.layer_id, q, k, v, self.scale, self.sliding_window)
        return self.o_proj(out.reshape(T, -1))


class MLP(nn.Module):
    """Up, the activation (relu2), down: an MLP block at the map's width, or the MoE's shared expert."""

    def __init__(self, cfg, ops, size: int):
        super().__init__()
        self.ops = ops
        self.act = cfg.get("mlp_hidden_act", "relu2")
        bias = bool(cfg.get("mlp_bias", False))
        self.up_proj = linear(cfg.hidden_size, size, bias)
        self.down_proj = linear(size, cfg.hidden_size, bias)

    def forward(self, hidden: torch.Tensor, batch=None) -> torch.Tensor:
        if is_quantized(self.up_proj) or is_quantized(self.down_proj):
            return self.down_proj(activation(self.act, self.up_proj(hidden)))
        return self.ops.mlp(hidden, self.up_proj.weight, self.down_proj.weight, None, self.act,
                            self.up_proj.bias, self.down_proj.bias)


class Router(nn.Module):
    def __init__(self, experts: int, hidden: int):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(experts, hidden), requires_grad=False)
        self.e_score_correction_bias = nn.Parameter(torch.zeros(experts), requires_grad=False)


class Experts(nn.Module):
    """All routed experts stacked: up_proj [E, I, W], down_proj [E, W, I] (W: the latent or hidden width)."""

    def __init__(self, experts: int, intermediate: int, width: int):
        super().__init__()
        E, I = experts, intermediate
        self.up_proj = nn.Parameter(torch.zeros(E, I, width), requires_grad=False)
        self.down_proj = nn.Parameter(torch.zeros(E, width, I), requires_grad=False)


class MoE(nn.Module):
    def __init__(self, cfg, layer, ops):
        super().__init__()
        self.ops = ops
        moe = layer.moe
        self.top_k = moe.top_k
        self.n_group, self.topk_group = moe.groups, moe.topk_groups
        self.norm_topk_prob = bool(cfg.get("norm_topk_prob", True))
        self.scaling = float(cfg.get("routed_scaling_factor", 1.0))
        self.act = cfg.get("mlp_hidden_act", "relu2")
        self.gate = Router(moe.experts, cfg.hidden_size)
        latent = moe.latent
        self.experts = Experts(moe.experts, moe.expert_intermediate, latent or cfg.hidden_size)
        self.shared_experts = MLP(cfg, ops, moe.shared_intermediate)
        if latent:
            bias = bool(cfg.get("mlp_bias", False))
            self.fc1_latent_proj = linear(cfg.hidden_size, latent, bias)
            self.fc2_latent_proj = linear(latent, cfg.hidden_size, bias)
        else:
            self.fc1_latent_proj = self.fc2_latent_proj = None

    def forward(self, hidden: torch.Tensor, batch=None):
        """The shared expert's output [T, H] (or its slices [T, S, H]) and the routed sum: [T, H], or,
        from a fused MoE that leaves the sum over k to the next residual add
        (`ops.moe_experts_unsummed`, `ops.moe_experts_shared_unsummed`), [T, k, H].
        The model's residual add takes the pair (stack.py, ops.add_rms_norm). With
        `ops.moe_experts_shared` (the CPU's) the layer's output [T, H], already summed."""
        logits = self.ops.router_logits(hidden, self.gate.weight)
        weights, ids = self.ops.route_sigmoid_grouped(logits, self.gate.e_score_correction_bias, self.top_k,
                                                      self.n_group, self.topk_group, self.norm_topk_prob, self.scaling)
        x = hidden if self.fc1_latent_proj is None else self.fc1_latent_proj(hidden)
        e = self.experts
        if getattr(e, "fp8_block", None) is not None:  # fp8 experts: the fused fp8 MoE
            su, sd = self.shared_experts.up_proj, self.shared_experts.down_proj
            if self.fc1_latent_proj is None and _fp8_like(su, e.fp8_block) and _fp8_like(sd, e.fp8_block) \
                    and self.shared_experts.act == self.act:
                # the shared expert in the same launches as the routed ones (at decode sizes)
                return self.ops.moe_experts_shared_fp8_unsummed(
                    x, weights, ids, e.up_proj, e.up_proj_scale_inv, e.down_proj, e.down_proj_scale_inv,
                    su.weight, su.weight_scale_inv, sd.weight, sd.weight_scale_inv, self.act, e.fp8_block)
            routed = self.ops.moe_experts_fp8(x, weights, ids, e.up_proj, e.up_proj_scale_inv, e.down_proj,
                                              e.down_proj_scale_inv, self.act, e.fp8_block)
            if self.fc2_latent_proj is not None:
                routed = self.fc2_latent_proj(routed.sum(1))
            return (self.shared_experts(hidden), routed)
        shared = self.shared_experts
        if self.fc2_latent_proj is None and shared.up_proj.bias is None and shared.down_proj.bias is None \
                and shared.act == self.act:
            # The shared expert and the routed ones together: summed (the CPU's two products at
            # decode sizes), or left in parts for the next residual add (two GPU launches).
            summed = getattr(self.ops, "moe_experts_shared", None)
            with_shared = summed or getattr(self.ops, "moe_experts_shared_unsummed", None)
            if with_shared is not None:
                return with_shared(x, weights, ids, self.experts.up_proj, self.experts.down_proj,
                                   shared.up_proj.weight, shared.down_proj.weight, self.act)
        unsummed = getattr(self.ops, "moe_experts_unsummed", None)
        if unsummed is not None and self.fc2_latent_proj is None:
            routed = unsummed(x, weights, ids, self.experts.up_proj, self.experts.down_proj, None, self.act)
        else:
            routed = self.ops.moe_experts(x, weights, ids, self.experts.up_proj, self.experts.down_proj, None, self.act)
        if self.fc2_latent_proj is not None:
            routed = self.fc2_latent_proj(routed)
        return (self.shared_experts(hidden), routed)


def _fp8_like(linear_layer, block) -> bool:
    """An fp8 linear without bias in the experts' scale blocks: it can ride in their fused launches."""
    return isinstance(linear_layer, Fp8Linear) and linear_layer.bias is None and tuple(linear_layer.block) == tuple(block)


_EXPERT = re.compile(r"^(backbone\.layers\.\d+\.mixer\.experts)\.(\d+)\.(up_proj|down_proj)\.weight$")


class NemotronHForCausalLM(StackedCausalLM):
    keep_float32 = ("mixer.gate.weight", "e_score_correction_bias")  # the router runs in float32
    parts = Parts(
        family="NemotronH",
        mixers={"mamba2": mamba2_mixer, "attention": Attention},
        ffns={"mlp": lambda cfg, layer, ops: MLP(cfg, ops, layer.mlp.intermediate), "moe": MoE},
        layout=Layout(root="backbone", embed="embeddings", final_norm="norm_f",
                      mixer_names={"mamba2": "mixer", "attention": "mixer"}, ffn_name="mixer",
                      mixer_norm="norm", ffn_norm="norm",  # one part per block, one norm
                      eps_keys=("layer_norm_epsilon",), eps_default=1e-5, norm_in_float32=True),
    )

    def map_weight_name(self, name: str):
        if name.startswith("model."):  # what transformers names the backbone in memory
            name = "backbone." + name[len("model."):]
        if name.startswith(("mtp.", "backbone.mtp")):  # multi-token-prediction layers: speculative decoding only
            return None
        if self.tied and name == "lm_head.weight":
            return None
        m = _EXPERT.match(name)
        if m:
            return f"{m.group(1)}.{m.group(3)}", int(m.group(2))
        return map_expert_scale(name) or (name, None)
