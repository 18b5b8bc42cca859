"""Jamba: Mamba (v1) layers with attention every `attn_layer_period`, MoE every `expert_layer_period`.

Attention iff i % attn_layer_period == attn_layer_offset, else Mamba1; MoE iff num_experts > 1 and
i % expert_layer_period == expert_layer_offset, else a dense SwiGLU MLP (HF JambaConfig's
layers_block_type / layers_num_experts). Mamba1 keeps a conv state of (d_conv - 1) taps over the
inner width and an SSM state of inner width x d_state.
"""

from __future__ import annotations

import math

from bringup.core.families import _blocks as b
from bringup.core.families._assemble import FamilyResult, LayerSpec
from bringup.core.families._view import ConfigView
from bringup.core.layermap.layer_geometry import MambaGeometry

MODEL_TYPES = ("jamba",)


def schedule(view: ConfigView, n: int) -> list[tuple[str, str]]:
    a_period = view.int("attn_layer_period", default=8)
    a_offset = view.int("attn_layer_offset", default=4, minimum=0)
    e_period = view.int("expert_layer_period", default=2)
    e_offset = view.int("expert_layer_offset", default=1, minimum=0)
    if a_offset >= a_period:
        raise view.bad("attn_layer_offset", a_offset, f"less than attn_layer_period ({a_period})")
    if e_offset >= e_period:
        raise view.bad("expert_layer_offset", e_offset, f"less than expert_layer_period ({e_period})")
    moe = view.int("num_experts", default=16) > 1
    return [
        ("attention" if i % a_period == a_offset else "mamba", "moe" if moe and i % e_period == e_offset else "mlp")
        for i in range(n)
    ]


def mamba1(view: ConfigView, h: int) -> b.Part:
    inner = view.int("mamba_expand", default=2) * h
    d_state = view.int("mamba_d_state", default=16)
    kernel = view.int("mamba_d_conv", default=4)
    raw_rank = view.data.get("mamba_dt_rank", "auto")
    rank = math.ceil(h / 16) if raw_rank in ("auto", None) else view.int("mamba_dt_rank")
    proj_bias = view.bool("mamba_proj_bias", default=False)
    conv_bias = view.bool("mamba_conv_bias", default=True)
    params = (
        b.linear(h, 2 * inner, proj_bias)
        + inner * kernel + (inner if conv_bias else 0)
        + inner * (rank + 2 * d_state)  # x_proj
        + b.linear(rank, inner, True)  # dt_proj
        + inner * d_state + inner  # A_log, D
        + b.linear(inner, h, proj_bias)
        + rank + 2 * d_state  # dt, B and C layernorms
    )
    return b.Part(params=params, conv_elems=inner * (kernel - 1), ssm_elems=inner * d_state,
                  mamba=MambaGeometry(inner=inner, d_state=d_state, conv_kernel=kernel, dt_rank=rank,
                                      keys=view.keys(inner="mamba_expand", d_state="mamba_d_state",
                                                     conv_kernel="mamba_d_conv", dt_rank="mamba_dt_rank")))


def build(view: ConfigView) -> FamilyResult:
    n = view.num_layers()
    h = view.int("hidden_size", default=4096)
    heads = view.int("num_attention_heads", default=32)
    kv_heads = view.int("num_key_value_heads", default=8)
    b.check_divisible(view, "hidden_size", h, heads, "hidden_size / num_attention_heads")
    attn = b.attention(h, heads, kv_heads, h // heads, keys=b.attention_keys(view, head_dim="hidden_size"))
    mixer_parts = {"attention": attn, "mamba": mamba1(view, h)}
    experts = view.int("num_experts", default=16)
    inter = view.int("intermediate_size", default=14336)
    ffn_parts = {
        "mlp": b.mlp(h, inter),
        "moe": b.moe(h, experts, view.int("num_experts_per_tok", default=2),
                     expert_params=b.gated_experts(h, inter), router=experts * h, expert_intermediate=inter,
                     keys=b.moe_keys(view, "num_experts", expert_intermediate="intermediate_size")),
    }
    layers = [LayerSpec(m, f, mixer_parts[m] + ffn_parts[f] + b.norm(2 * h)) for m, f in schedule(view, n)]
    return FamilyResult(
        layers=layers,
        # SGLang has no Jamba; its Mamba-1 models go through the mamba2 config path (sglang-notes §1.2).
        hybrid_family="mamba2",
        outside=b.embeddings(view.int("vocab_size", default=65536), h, view.bool("tie_word_embeddings", default=False)),
    )
