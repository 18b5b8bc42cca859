"""Falcon-H1: every layer runs attention and a Mamba2 mixer side by side on the same normed input and
adds their outputs, then a SwiGLU MLP. So every layer is both a KV layer and a state layer (the
layer map's "attention+mamba2"), and a request needs a KV page and a state slot in each.

Its muP multipliers are folded into the weights once they are loaded (`finish_loading`), so the
forward pass is the plain one: ssm_in_multiplier and the per-section ssm_multipliers (z, x, B, C, dt)
into the Mamba2 in_proj rows, ssm_out_multiplier into its out_proj, attention_in_multiplier into
q/k/v, key_multiplier into k, attention_out_multiplier into o_proj, mlp_multipliers into the MLP's
gate and down projections. The embedding and LM-head multipliers stay scalars on the activations
(the embedding may be tied to the head).
Weights as transformers saves them: `model.layers.N.self_attn...`, `model.layers.N.mamba...` (here
both under `model.layers.N.parallel`).
"""

from __future__ import annotations

import re

import torch
from torch import nn

from .hybrid_attention import HybridAttention, RopeTable
from .llama import GatedMLP
from .mamba2 import Mamba2Mixer, time_step_limit
from .stack import Layout, Parts, StackedCausalLM


def falcon_mamba2(cfg, layer, ops) -> Mamba2Mixer:
    if cfg.get("hidden_act", "silu") != "silu":
        raise ValueError(f"Falcon-H1 hidden_act {cfg.hidden_act!r} is not supported by the Mamba2 kernels; only 'silu'")
    if cfg.get("mamba_rms_norm", False):
        gate = "gated_norm" if cfg.get("mamba_norm_before_gate", True) else "norm_gated"
    else:
        gate = "gate"
    return Mamba2Mixer(cfg.hidden_size, layer, ops, eps=cfg.get("rms_norm_eps", 1e-5), dt_limit=time_step_limit(cfg),
                       proj_bias=bool(cfg.get("mamba_proj_bias", False)),
                       conv_bias=bool(cfg.get("mamba_conv_bias", True)),
                       out_bias=bool(cfg.get("projectors_bias", False)), gate=gate)


class ParallelMixer(nn.Module):
    """Attention + Mamba2 on the same input, outputs summed. Exposes both caches' geometry."""

    def __init__(self, cfg, layer, ops):
        super().__init__()
        self.self_attn = HybridAttention(cfg, layer, ops)
        self.mamba = falcon_mamba2(cfg, layer, ops)
        self.num_kv_heads, self.head_dim = self.self_attn.num_kv_heads, self.self_attn.head_dim
        self.conv_shape, self.ssm_shape = self.mamba.conv_shape, self.mamba.ssm_shape

    def forward(self, hidden: torch.Tensor, batch) -> torch.Tensor:
        return self.mamba(hidden, batch) + self.self_attn(hidden, batch)


def mup_vector(cfg, m: Mamba2Mixer) -> torch.Tensor:
    """Per-row multipliers of the Mamba2 in_proj output: z, x, B, C, dt sections."""
    mults = [float(v) for v in (cfg.get("ssm_multipliers") or [1.0] * 5)]
    gn = m.n_groups * m.d_state
    sizes = [m.intermediate, m.intermediate, gn, gn, m.num_heads]
    return torch.cat([torch.full((n,), v) for n, v in zip(sizes, mults)])


def _scale(linear_layer: nn.Linear, rows: torch.Tensor | float, weight_only: float = 1.0) -> None:
    """y = (W x * weight_only + b) * rows, as weights: W <- W * rows * weight_only, b <- b * rows."""
    w = linear_layer.weight.data
    r = rows.to(w.device, torch.float32)[:, None] if isinstance(rows, torch.Tensor) else rows
    linear_layer.weight.data = (w.float() * r * weight_only).to(w.dtype)
    if linear_layer.bias is not None:
        b = linear_layer.bias.data
        linear_layer.bias.data = (b.float() * (r[:, 0] if isinstance(r, torch.Tensor) else r)).to(b.dtype)


_PARALLEL = re.compile(r"^(model\.layers\.\d+)\.(self_attn|mamba)\.")


class FalconH1ForCausalLM(StackedCausalLM):
    parts = Parts(
        family="FalconH1",
        mixers={"attention+mamba2": ParallelMixer},
        ffns={"mlp": GatedMLP},
        layout=Layout(root="model", embed="embed_tokens", final_norm="final_layernorm",
                      mixer_names={"attention+mamba2": "parallel"}, ffn_name="feed_forward",
                      mixer_norm="input_layernorm", ffn_norm="pre_ff_layernorm", eps_default=1e-5),
    )

    def __init__(self, config: dict, ops, layer_map):
        super().__init__(config, ops, layer_map)
        cfg = self.config
        self.embed_scale = float(cfg.get("embedding_multiplier", 1.0))
        self.logit_scale = float(cfg.get("lm_head_multiplier", 1.0))
        self.rope = RopeTable(cfg, self.decoder.layers[0].mixer_module.head_dim)

    def begin(self, batch) -> None:
        self.rope.begin(batch)

    def finish_loading(self) -> None:
        self.rope.refresh()
        cfg = self.config
        get = lambda key: float(cfg.get(key, 1.0))  # noqa: E731
        gate_m, down_m = (float(v) for v in (cfg.get("mlp_multipliers") or [1.0, 1.0]))
        for layer in self.decoder.layers:
            mixer = layer.mixer_module
            m, a = mixer.mamba, mixer.self_attn
            _scale(m.in_proj, mup_vector(cfg, m), weight_only=get("ssm_in_multiplier"))
            _scale(m.out_proj, get("ssm_out_multiplier"))
            for proj in (a.q_proj, a.v_proj):
                _scale(proj, 1.0, weight_only=get("attention_in_multiplier"))
            _scale(a.k_proj, get("key_multiplier"), weight_only=get("attention_in_multiplier"))
            _scale(a.o_proj, get("attention_out_multiplier"))
            _scale(layer.ffn_module.gate_proj, gate_m)
            _scale(layer.ffn_module.down_proj, down_m)

    # The multipliers finish_loading folds into the weights: a transformers twin holding the folded
    # weights (hf_twin.py) must not apply them again.
    FOLDED_MULTIPLIERS = {"ssm_in_multiplier": 1.0, "ssm_out_multiplier": 1.0, "ssm_multipliers": [1.0] * 5,
                          "attention_in_multiplier": 1.0, "key_multiplier": 1.0, "attention_out_multiplier": 1.0,
                          "mlp_multipliers": [1.0, 1.0]}

    def twin_config(self, config: dict) -> dict:
        """The config a transformers twin of these (folded) weights computes the same function with."""
        return {**config, **self.FOLDED_MULTIPLIERS}

    def map_weight_name(self, name: str):
        if self.tied and name == "lm_head.weight":
            return None
        return _PARALLEL.sub(r"\1.parallel.\2.", name), None
