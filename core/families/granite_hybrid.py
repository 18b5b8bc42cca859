"""GraniteMoeHybrid (Granite-4.0-H) and Bamba: Mamba2 layers with a few attention layers.

Granite: `layer_types[i]` is `mamba` or `attention` (transformers v5: linear_attention /
full_attention); without it transformers makes every layer Mamba2. Every Granite layer has a
shared SwiGLU MLP, plus a routed MoE when num_local_experts > 0. Bamba lists its attention layers
in `attn_layer_indices` (the rest are Mamba2) and has a plain SwiGLU MLP per layer.
"""

from __future__ import annotations

from bringup.core.families import _blocks as b
from bringup.core.families._assemble import FamilyResult, LayerSpec
from bringup.core.families._bamba_keys import bamba_style_mamba2
from bringup.core.families._view import ConfigView

MODEL_TYPES = ("granitemoehybrid", "bamba")
_TYPES = {"mamba": "mamba2", "linear_attention": "mamba2", "attention": "attention", "full_attention": "attention"}


def mixers(view: ConfigView, n: int, notes: list[str]) -> list[str]:
    if view.data.get("model_type") == "bamba":
        attn = set(view.layer_ids("attn_layer_indices", n, default=[]))
        return ["attention" if i in attn else "mamba2" for i in range(n)]
    if view.has("layer_types", "layers_block_type"):
        key = "layer_types" if view.has("layer_types") else "layers_block_type"
        types = view.list(key, item=str)
        if len(types) != n or any(t not in _TYPES for t in types):
            raise view.bad(key, types, f"{n} entries of mamba | attention")
        return [_TYPES[t] for t in types]
    notes.append("no layer_types: every layer is Mamba2, as transformers' GraniteMoeHybridConfig assumes")
    return ["mamba2"] * n


def build(view: ConfigView) -> FamilyResult:
    notes: list[str] = []
    n = view.num_layers()
    h = view.int("hidden_size", default=4096)
    heads = view.int("num_attention_heads", default=32)
    kv_heads = view.int("num_key_value_heads", default=heads)
    b.check_divisible(view, "hidden_size", h, heads, "hidden_size / num_attention_heads")
    bias = view.bool("attention_bias", default=False)
    attn = b.attention(h, heads, kv_heads, h // heads, qkv_bias=bias, o_bias=bias,
                       keys=b.attention_keys(view, head_dim="hidden_size"))
    inter = view.int("mamba_expand", default=2) * h
    m_heads = view.int("mamba_n_heads", default=128)
    b.check_divisible(view, "mamba width (mamba_expand x hidden_size)", inter, m_heads, "mamba_n_heads")
    raw_head = view.data.get("mamba_d_head")
    m_head_dim = inter // m_heads if raw_head in (None, "auto") else view.int("mamba_d_head")
    if m_head_dim * m_heads != inter:
        raise view.bad("mamba_d_head", raw_head, f"mamba_expand x hidden_size / mamba_n_heads = {inter // m_heads}")
    proj_bias = view.bool("mamba_proj_bias", default=False)
    mamba = bamba_style_mamba2(view, h, m_heads, m_head_dim, intermediate=inter, proj_bias=proj_bias)
    b.check_divisible(view, "mamba width", inter, mamba.mamba2.groups, "mamba_n_groups")
    if view.data.get("model_type") == "bamba":
        ffn_kind = "mlp"
        ffn = b.mlp(h, view.int("intermediate_size", default=14336), bias=view.bool("mlp_bias", default=False))
    else:
        experts = view.int("num_local_experts", default=8, minimum=0)
        shared_inter = view.int("shared_intermediate_size", default=1024)
        shared = b.mlp(h, shared_inter, key="shared_intermediate_size")
        if experts:
            ffn_kind = "moe"
            moe_inter = view.int("intermediate_size", default=11008)
            ffn = b.moe(
                h, experts, view.int("num_experts_per_tok", default=2),
                expert_params=b.gated_experts(h, moe_inter),
                router=experts * h,
                shared=shared.params,
                expert_intermediate=moe_inter, shared_intermediate=shared_inter,
                keys=b.moe_keys(view, "num_local_experts", expert_intermediate="intermediate_size"),
            )
        else:
            ffn_kind, ffn = "mlp", shared
    layers = [
        LayerSpec(m, ffn_kind, (attn if m == "attention" else mamba) + ffn + b.norm(2 * h))
        for m in mixers(view, n, notes)
    ]
    has_mamba = any(l.mixer == "mamba2" for l in layers)
    return FamilyResult(
        layers=layers,
        # SGLang treats Granite as a mamba2 hybrid only when some layer is Mamba.
        hybrid_family="mamba2" if has_mamba else None,
        outside=b.embeddings(view.int("vocab_size", default=32000 if view.data.get("model_type") != "bamba" else 128000), h,
                             view.bool("tie_word_embeddings", default=False)),
        notes=notes,
    )
