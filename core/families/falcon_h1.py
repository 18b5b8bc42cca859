"""Falcon-H1: every layer runs attention and a Mamba2 mixer in parallel, then a SwiGLU MLP.

No per-layer switch (`attn_layer_indices` is null in released configs): every layer is both a KV
layer and a state layer, as SGLang's FalconH1 config says (full_attention_layer_ids = all).
The Mamba2 width is `mamba_d_ssm` when given, else heads x head dim, else expand x hidden.
"""

from __future__ import annotations

from bringup.core.families import _blocks as b
from bringup.core.families._assemble import FamilyResult, LayerSpec
from bringup.core.families._bamba_keys import bamba_style_mamba2
from bringup.core.families._view import ConfigView

MODEL_TYPES = ("falcon_h1",)


def mamba_width(view: ConfigView, h: int) -> tuple[int, int, int]:
    heads = view.int("mamba_n_heads", default=128)
    expand = view.int("mamba_expand", default=2)
    if view.has("mamba_d_ssm"):
        inter = view.int("mamba_d_ssm")
    elif isinstance(view.data.get("mamba_d_head"), int) and view.data["mamba_d_head"] > 0:
        inter = heads * view.int("mamba_d_head")
    else:
        inter = expand * h
    raw_head = view.data.get("mamba_d_head")
    head_dim = inter // heads if raw_head in (None, "auto") else view.int("mamba_d_head")
    b.check_divisible(view, "mamba width", inter, heads, "mamba_d_ssm / mamba_n_heads")
    if head_dim * heads != inter:
        raise view.bad("mamba_d_head", raw_head, f"mamba_d_ssm / mamba_n_heads = {inter // heads}")
    return inter, heads, head_dim


def build(view: ConfigView) -> FamilyResult:
    n = view.num_layers()
    h = view.int("hidden_size", default=4096)
    heads = view.int("num_attention_heads", default=32)
    kv_heads = view.int("num_key_value_heads", default=heads)
    head_dim = view.int("head_dim", default=max(1, h // heads))
    bias = view.bool("attention_bias", default=False)
    inter, m_heads, m_head_dim = mamba_width(view, h)
    mamba = bamba_style_mamba2(
        view, h, m_heads, m_head_dim, intermediate=inter,
        proj_bias=view.bool("mamba_proj_bias", default=False),
        out_bias=view.bool("projectors_bias", default=False),
        gated_norm=view.bool("mamba_rms_norm", default=False),
    )
    attn = b.attention(h, heads, kv_heads, head_dim, qkv_bias=bias, o_bias=bias, keys=b.attention_keys(view))
    mlp = b.mlp(h, view.int("intermediate_size", default=14336), bias=view.bool("mlp_bias", default=False))
    notes = []
    if view.has("attn_layer_indices"):
        notes.append("attn_layer_indices is set but transformers' Falcon-H1 runs attention in every layer; so do we")
    part = attn + mamba + mlp + b.norm(2 * h)
    return FamilyResult(
        layers=[LayerSpec("attention+mamba2", "mlp", part) for _ in range(n)],
        hybrid_family="mamba2",
        outside=b.embeddings(view.int("vocab_size", default=128000), h, view.bool("tie_word_embeddings", default=False)),
        notes=notes,
    )
