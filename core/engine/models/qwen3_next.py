"""Qwen3-Next and Qwen3.5 (dense and MoE): gated DeltaNet layers (gated_delta_net.py) with gated
full attention every few layers; an FFN after every mixer: a SwiGLU MLP or a sparse MoE with a
sigmoid-gated shared expert. Which layer is which comes from the layer map
(core/families/qwen3_next.py).

Attention: the query projection is twice as wide (per head, the query then a sigmoid gate on the
output), per-head RMSNorm on q and k, RoPE on the first `partial_rotary_factor` of each head.
The RMSNorms around the blocks and on q/k are zero-centred: they multiply by (1 + w), in float32;
the checkpoint's w gets its 1 added as it loads, so the norms here are ordinary.
Weights as transformers saves them: `model.layers.N.linear_attn...`, `model.layers.N.self_attn...`,
experts one by one (`mlp.experts.E.gate_proj.weight`). Qwen3.5 (`qwen3_5_text`, `qwen3_5_moe_text`)
spells the DeltaNet projections separately; its multimodal RoPE equals plain RoPE for text.
"""

from __future__ import annotations

import re

import torch
import torch.nn.functional as F
from torch import nn

from .attention import head_geometry, rotary_attention
from .base import RMSNormWeight, linear
from .fused_gate_up import FusedGateUp
from .fused_linears import can_stack, fusing, stacked
from .fused_qkv import FusedQKV
from .gated_delta_net import GatedDeltaNet
from .rope import inv_freq_for
from .stack import Layout, Parts, StackedCausalLM

ROPE_KEY = "rope_inv_freq"


def gated_delta_net(cfg, layer, ops) -> GatedDeltaNet:
    if cfg.get("hidden_act", "silu") != "silu":
        raise ValueError(f"hidden_act {cfg.hidden_act!r} is not supported for gated DeltaNet; only 'silu'")
    fused = not str(cfg.get("model_type", "")).startswith("qwen3_5")
    return GatedDeltaNet(cfg.hidden_size, layer, ops, eps=cfg.get("rms_norm_eps", 1e-6), fused_projections=fused)


class GatedAttention(FusedQKV, nn.Module):
    """GQA with an output gate from the query projection, q/k norms and partial RoPE, through the shared
    rotary_attention (the fused norm-rope-cache-write and decode ops where the device has them); q/k/v
    as one product on accelerators (fused_qkv.py)."""

    def __init__(self, cfg, layer, ops):
        super().__init__()
        self.layer_id, self.ops = layer.index, ops
        self.num_heads, self.num_kv_heads, self.head_dim = head_geometry(layer)
        self.scale = self.head_dim ** -0.5
        bias = bool(cfg.get("attention_bias", False))
        H, D = self.num_heads, self.head_dim
        self.q_proj = linear(cfg.hidden_size, 2 * H * D, bias)
        self.k_proj = linear(cfg.hidden_size, self.num_kv_heads * D, bias)
        self.v_proj = linear(cfg.hidden_size, self.num_kv_heads * D, bias)
        self.o_proj = linear(H * D, cfg.hidden_size, bias)
        eps = cfg.get("rms_norm_eps", 1e-6)
        self.q_norm = RMSNormWeight(D, eps)
        self.k_norm = RMSNormWeight(D, eps)

    def forward(self, hidden: torch.Tensor, batch) -> torch.Tensor:
        T, H, D = hidden.shape[0], self.num_heads, self.head_dim
        q_gate, k, v = self.fuse_projections(hidden)
        q, gate = q_gate.view(T, H, 2 * D).split([D, D], dim=-1)  # per head: the query, then its gate
        k, v = k.view(T, self.num_kv_heads, D), v.view(T, self.num_kv_heads, D)
        inv_freq = batch.memo[ROPE_KEY]
        out = rotary_attention(self.ops, batch, self.layer_id, q, k, v, inv_freq, self.scale, q_norm=self.q_norm,
                               k_norm=self.k_norm, norm_in_float32=True, rotary_dim=2 * inv_freq.shape[0])
        out = out.reshape(T, H * D) * torch.sigmoid(gate.reshape(T, H * D))
        return self.o_proj(out)


class SwiGLU(FusedGateUp, nn.Module):
    """down(silu(gate x) * up x); gate and up as one product on accelerators (fused_gate_up.py)."""

    act = "silu"

    def __init__(self, cfg, ops, intermediate_size: int):
        super().__init__()
        self.ops = ops
        self.gate_proj = linear(cfg.hidden_size, intermediate_size, False)
        self.up_proj = linear(cfg.hidden_size, intermediate_size, False)
        self.down_proj = linear(intermediate_size, cfg.hidden_size, False)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.gated_mlp(hidden)


class SharedExpertMoE(nn.Module):
    """Softmax top-k routed SwiGLU experts plus a shared expert scaled by sigmoid(shared_expert_gate(x))."""

    def __init__(self, cfg, layer, ops):
        super().__init__()
        self.ops = ops
        moe = layer.moe
        E, I, H = moe.experts, moe.expert_intermediate, cfg.hidden_size
        self.top_k = moe.top_k
        self.norm_topk_prob = bool(cfg.get("norm_topk_prob", True))
        self.gate = linear(H, E, False)
        self.experts = nn.Module()
        self.experts.gate_proj = nn.Parameter(torch.zeros(E, I, H), requires_grad=False)
        self.experts.up_proj = nn.Parameter(torch.zeros(E, I, H), requires_grad=False)
        self.experts.down_proj = nn.Parameter(torch.zeros(E, H, I), requires_grad=False)
        shared = moe.shared_intermediate
        self.shared_expert = SwiGLU(cfg, ops, shared) if shared else None
        self.shared_expert_gate = linear(H, 1, False) if shared else None

    def forward(self, hidden: torch.Tensor):
        """(the shared expert's output or None, the routed experts' output, the shared expert's gate logits
        [T, 1] or absent): the model's residual add takes the parts (stack.py, ops.add_rms_norm), scales the
        shared one by sigmoid(gate) and sums a fused MoE's per-assignment parts [T, k, H]
        (ops.moe_gated_experts_unsummed) in its own launch."""
        logits, gate_logits = self._router_logits(hidden)
        # transformers rounds the routing weights to the model dtype (inside the router's launch)
        weights, ids = self.ops.route_softmax(logits, self.top_k, self.norm_topk_prob, logits.dtype)
        e = self.experts
        unsummed = getattr(self.ops, "moe_gated_experts_unsummed", None)
        if unsummed is not None:
            routed = unsummed(hidden, weights, ids, e.gate_proj, e.up_proj, e.down_proj, "silu")
        else:
            routed = self.ops.moe_experts(hidden, weights, ids, e.up_proj, e.down_proj, e.gate_proj, "silu")
        if self.shared_expert is None:
            return (None, routed)
        return (self.shared_expert(hidden), routed, gate_logits)

    def _router_logits(self, hidden: torch.Tensor):
        """(router logits [T, E], shared expert gate logits [T, 1] or None): one GEMM over the two stacked
        weights where the MLPs' gate/up are stacked too (accelerators: fused_gate_up.py)."""
        parts = (self.gate, self.shared_expert_gate)
        if self.shared_expert_gate is not None and fusing(FusedGateUp.fuse_gate_up, hidden) and can_stack(parts):
            weight, _ = stacked(self, "router", parts)
            both = F.linear(hidden, weight)
            return both[:, :-1], both[:, -1:]
        gate = self.shared_expert_gate(hidden) if self.shared_expert_gate is not None else None
        return F.linear(hidden, self.gate.weight), gate


_EXPERT = re.compile(r"^(model\.layers\.\d+\.mlp\.experts)\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight$")
_FUSED_EXPERTS = re.compile(r"^(model\.layers\.\d+\.mlp)\.experts\.(gate_up_proj|down_proj)$")
# The zero-centred norms (weight stored as w, applied as 1 + w).
_CENTRED = re.compile(r"(input_layernorm|post_attention_layernorm|self_attn\.q_norm|self_attn\.k_norm)\.weight$"
                      r"|^model\.norm\.weight$")


class Qwen3NextForCausalLM(StackedCausalLM):
    """Qwen3-Next, Qwen3.5 text (dense) and Qwen3.5-MoE text."""

    parts = Parts(
        family="Qwen3-Next",
        mixers={"gated_delta_net": gated_delta_net, "attention": GatedAttention},
        ffns={"mlp": lambda cfg, layer, ops: SwiGLU(cfg, ops, layer.mlp.intermediate), "moe": SharedExpertMoE},
        layout=Layout(root="model", embed="embed_tokens", final_norm="norm",
                      mixer_names={"gated_delta_net": "linear_attn", "attention": "self_attn"}, ffn_name="mlp",
                      mixer_norm="input_layernorm", ffn_norm="post_attention_layernorm", norm_in_float32=True),
    )

    def __init__(self, config: dict, ops, layer_map):
        super().__init__(config, ops, layer_map)
        self.register_buffer("inv_freq", inv_freq_for(self.config, self._head_dim), persistent=False)

    @property
    def _head_dim(self) -> int:
        kv = self.layer_map.kv_layers
        if kv:
            return self.decoder.layers[kv[0]].mixer_module.head_dim
        return int(self.config.get("head_dim") or self.config.hidden_size // self.config.num_attention_heads)

    def finish_loading(self) -> None:
        self.inv_freq = inv_freq_for(self.config, self._head_dim).to(self.inv_freq.device)

    def begin(self, batch) -> None:
        batch.memo[ROPE_KEY] = self.inv_freq

    def load_weights(self, weights) -> None:
        def centred(items):
            for name, tensor in items:
                target = self.map_weight_name(name)
                yield name, (tensor.float() + 1.0 if target and _CENTRED.search(target[0]) else tensor)

        super().load_weights(centred(weights))

    def twin_tensor(self, name: str):
        """What transformers' in-memory tensor `name` holds (hf_twin.py), where it is not a checkpoint
        tensor: its experts fused per layer (gate_up_proj [E, 2I, H], gate first; down_proj) and its
        zero-centred norms, which hold w where ours hold 1 + w. None: the checkpoint's name applies."""
        m = _FUSED_EXPERTS.match(name)
        params = dict(self.named_parameters())
        if m:
            prefix = f"{m.group(1)}.experts."
            if m.group(2) == "down_proj":
                return params[prefix + "down_proj"]
            return torch.cat([params[prefix + "gate_proj"], params[prefix + "up_proj"]], dim=1)
        target = self.map_weight_name(name)
        if target is not None and target[1] is None and _CENTRED.search(target[0]) and target[0] in params:
            return params[target[0]].float() - 1.0
        return None

    def map_weight_name(self, name: str):
        if name.startswith("model.language_model."):  # Qwen3.5 saved from its multimodal class
            name = "model." + name[len("model.language_model."):]
        if name.startswith(("mtp.", "model.visual.", "visual.")) or name.endswith("rotary_emb.inv_freq"):
            return None
        if self.tied and name == "lm_head.weight":
            return None
        m = _EXPERT.match(name)
        if m:
            return f"{m.group(1)}.{m.group(3)}", int(m.group(2))
        return name, None
