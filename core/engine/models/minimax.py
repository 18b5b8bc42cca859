"""MiniMax-M1 / MiniMax-Text-01: lightning attention (lightning_attention.py) with softmax GQA
attention every few layers (the layer map's `layer_types` / `attn_type_list`), a sparse MoE of
SwiGLU experts after every mixer (softmax top-k, renormalised).

The residual wiring differs from the pre-norm stack: the norm's output is the residual, scaled,
    h = norm1(h); h = alpha * h + beta * mixer(h); h = norm2(h); h = alpha' * h + beta' * moe(h)
with alpha/beta from the config per mixer kind (full_attn_*, linear_attn_*) and for the MLP.
Weights as transformers saves them: `model.layers.N.self_attn...`, experts one by one
(`block_sparse_moe.experts.E.w1.weight`: w1 gate, w3 up, w2 down).
"""

from __future__ import annotations

import re

import torch
import torch.nn.functional as F
from torch import nn

from .attention import head_geometry, rotary_attention
from .base import linear
from .fused_qkv import FusedQKV
from .lightning_attention import LightningAttention
from .routed_experts import swiglu_experts
from .rope import inv_freq_for
from .stack import DecoderLayer, Layout, Parts, StackedCausalLM

ROPE_KEY = "rope_inv_freq"


class MiniMaxAttention(FusedQKV, nn.Module):
    """GQA with RoPE on the first rotary dims of each head; the config's sliding_window if any. q/k/v as
    one product and the rotary, cache write and decode attention fused where the device has them
    (rotary_attention)."""

    def __init__(self, cfg, layer, ops):
        super().__init__()
        self.layer_id, self.ops = layer.index, ops
        self.num_heads, self.num_kv_heads, self.head_dim = head_geometry(layer)
        self.scale = self.head_dim ** -0.5
        self.window = cfg.get("sliding_window")
        H, D = self.num_heads, self.head_dim
        self.q_proj = linear(cfg.hidden_size, H * D, False)
        self.k_proj = linear(cfg.hidden_size, self.num_kv_heads * D, False)
        self.v_proj = linear(cfg.hidden_size, self.num_kv_heads * D, False)
        self.o_proj = linear(H * D, cfg.hidden_size, False)

    def forward(self, hidden: torch.Tensor, batch) -> torch.Tensor:
        T = hidden.shape[0]
        q, k, v = self.project_qkv(hidden)
        inv_freq = batch.memo[ROPE_KEY]
        out = rotary_attention(self.ops, batch, self.layer_id, q, k, v, inv_freq, self.scale, self.window,
                               rotary_dim=2 * inv_freq.shape[0])
        return self.o_proj(out.reshape(T, -1))


class MiniMaxMoE(nn.Module):
    def __init__(self, cfg, layer, ops):
        super().__init__()
        self.ops = ops
        moe = layer.moe
        E, I, H = moe.experts, moe.expert_intermediate, cfg.hidden_size
        self.top_k = moe.top_k
        self.gate = linear(H, E, False)
        self.experts = nn.Module()
        self.experts.w1 = nn.Parameter(torch.zeros(E, I, H), requires_grad=False)  # gate
        self.experts.w3 = nn.Parameter(torch.zeros(E, I, H), requires_grad=False)  # up
        self.experts.w2 = nn.Parameter(torch.zeros(E, H, I), requires_grad=False)  # down

    def forward(self, hidden: torch.Tensor):
        """As JambaMoE's (jamba.py): [T, H], or (None, [T, k, H]) for the next residual add to sum."""
        # softmax in float32, renormalised, the weights rounded to the model's dtype, as transformers
        weights, ids = self.ops.route_softmax(F.linear(hidden, self.gate.weight), self.top_k, True, hidden.dtype)
        e = self.experts
        return swiglu_experts(self.ops, hidden, weights, ids, e.w1, e.w3, e.w2)


class MiniMaxDecoderLayer(DecoderLayer):
    """Post-norm residuals scaled by the config's alpha/beta factors (see the module docstring), as
    the stack's factors and postnorm, so each add still runs fused with the next norm."""

    def __init__(self, cfg, layer, parts, ops):
        super().__init__(cfg, layer, parts, ops)
        kind = "linear_attn" if layer.mixer == "lightning_attention" else "full_attn"
        remote = "linear_attention" if layer.mixer == "lightning_attention" else "full_attention"
        self.factors = {
            "mixer": (_factor(cfg, f"{kind}_alpha_factor", f"layernorm_{remote}_alpha"),
                      _factor(cfg, f"{kind}_beta_factor", f"layernorm_{remote}_beta")),
            "ffn": (_factor(cfg, "mlp_alpha_factor", "layernorm_mlp_alpha"),
                    _factor(cfg, "mlp_beta_factor", "layernorm_mlp_beta")),
        }
        # MiniMax's remote code (minimax_m1, minimax_text_01) can also keep the un-normed residual.
        self.postnorm = bool(cfg.get("postnorm", True))


def _factor(cfg, key: str, remote_key: str) -> float:
    """transformers' `minimax` spells the residual factors *_alpha_factor; the remote code layernorm_*_alpha."""
    value = cfg.get(key)
    return float(cfg.get(remote_key, 1.0) if value is None else value)


def lightning(cfg, layer, ops) -> LightningAttention:
    if cfg.get("hidden_act", "silu") != "silu":
        raise ValueError(f"hidden_act {cfg.hidden_act!r} is not supported for lightning attention; only 'silu'")
    return LightningAttention(cfg.hidden_size, layer, ops, num_layers=int(cfg.num_hidden_layers), eps=1e-6)


_EXPERT = re.compile(r"^(model\.layers\.\d+\.block_sparse_moe\.experts)\.(\d+)\.(w1|w2|w3)\.weight$")
_TWIN_MOE = re.compile(r"^(model\.layers\.\d+)\.mlp\.(gate\.weight|experts\.gate_up_proj|experts\.down_proj)$")
_DERIVED = ("slope_rate", "query_decay", "key_decay", "diagonal_decay", "rotary_emb.inv_freq")


class MiniMaxForCausalLM(StackedCausalLM):
    layer_class = MiniMaxDecoderLayer
    parts = Parts(
        family="MiniMax",
        mixers={"lightning_attention": lightning, "attention": MiniMaxAttention},
        ffns={"moe": MiniMaxMoE},
        layout=Layout(root="model", embed="embed_tokens", final_norm="norm",
                      mixer_names={"lightning_attention": "self_attn", "attention": "self_attn"},
                      ffn_name="block_sparse_moe", mixer_norm="input_layernorm", ffn_norm="post_attention_layernorm",
                      eps_default=1e-5),
    )

    def __init__(self, config: dict, ops, layer_map):
        super().__init__(config, ops, layer_map)
        self.register_buffer("inv_freq", inv_freq_for(self.config, self._head_dim), persistent=False)

    @property
    def _head_dim(self) -> int:
        """The rotated width: the remote code's rotary_dim, else the head (transformers' partial_rotary_factor applies)."""
        return int(self.config.get("rotary_dim") or self.config.get("head_dim")
                   or self.config.hidden_size // self.config.num_attention_heads)

    def finish_loading(self) -> None:
        self.inv_freq = inv_freq_for(self.config, self._head_dim).to(self.inv_freq.device)

    def begin(self, batch) -> None:
        batch.memo[ROPE_KEY] = self.inv_freq

    def twin_tensor(self, name: str):
        """What transformers' in-memory tensor `name` holds (hf_twin.py) where its names are not the
        checkpoint's: the MoE under `mlp`, experts fused per layer (gate_up_proj [E, 2I, H] = w1 then
        w3; down_proj = w2). None: the checkpoint's name applies."""
        m = _TWIN_MOE.match(name)
        if m is None:
            return None
        params = dict(self.named_parameters())
        moe = f"{m.group(1)}.block_sparse_moe."
        if m.group(2) == "gate.weight":
            return params[moe + "gate.weight"]
        if m.group(2) == "experts.down_proj":
            return params[moe + "experts.w2"]
        return torch.cat([params[moe + "experts.w1"], params[moe + "experts.w3"]], dim=1)

    def map_weight_name(self, name: str):
        if name.endswith(_DERIVED) or (self.tied and name == "lm_head.weight"):
            return None
        m = _EXPERT.match(name)
        if m:
            return f"{m.group(1)}.{m.group(3)}", int(m.group(2))
        return name, None
