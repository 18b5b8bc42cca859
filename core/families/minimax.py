"""MiniMax-M1 / MiniMax-Text-01: lightning (linear) attention with softmax attention every 8th layer.

`attn_type_list[i]` is 0 for lightning attention and 1 for softmax attention (the remote
`modeling_minimax_m1.py`); transformers' `minimax` writes the same as `layer_types`
(linear_attention | full_attention). Every layer's FFN is a sparse MoE (`block_sparse_moe`).
"""

from __future__ import annotations

from bringup.core.families import _blocks as b
from bringup.core.families._assemble import FamilyResult, LayerSpec
from bringup.core.families._view import ConfigView
from bringup.core.layermap.layer_geometry import LightningGeometry

MODEL_TYPES = ("minimax", "minimax_m1", "minimax_text_01")
_TYPES = {"linear_attention": "lightning_attention", "full_attention": "attention"}


def mixers(view: ConfigView, n: int) -> list[str]:
    if view.has("layer_types"):
        return view.per_layer("layer_types", n, _TYPES)
    if view.has("attn_type_list"):
        kinds = view.list("attn_type_list", item=int)
        if len(kinds) != n or any(k not in (0, 1) for k in kinds):
            raise view.bad("attn_type_list", kinds, f"{n} entries of 0 (lightning) or 1 (softmax)")
        return ["attention" if k == 1 else "lightning_attention" for k in kinds]
    # transformers' MiniMaxConfig default: alternating, softmax first.
    return ["attention" if (i + 1) % 2 else "lightning_attention" for i in range(n)]


def build(view: ConfigView) -> FamilyResult:
    n = view.num_layers()
    h = view.int("hidden_size", default=4096)
    heads = view.int("num_attention_heads", default=32)
    kv_heads = view.int("num_key_value_heads", default=heads)
    head_dim = view.int("head_dim", default=0, minimum=0) or h // heads
    if head_dim < 1:
        raise view.bad("hidden_size", h, f"at least num_attention_heads ({heads}) when head_dim is absent")
    width = heads * head_dim
    lightning = b.Part(
        params=h * 3 * width + width * h + h * width + width,  # qkv, out, output gate, norm
        ssm_elems=heads * head_dim * head_dim,  # the linear-attention KV state per head
        lightning=LightningGeometry(heads=heads, head_dim=head_dim,
                                    keys=view.keys(heads="num_attention_heads", head_dim="head_dim")),
    )
    attn = b.attention(h, heads, kv_heads, head_dim, keys=b.attention_keys(view))
    experts = view.int("num_local_experts", "num_experts", default=8)
    inter = view.int("intermediate_size", default=14336)
    moe = b.moe(
        h, experts, view.int("num_experts_per_tok", default=2),
        expert_params=b.gated_experts(h, inter),
        router=experts * h,
        expert_intermediate=inter,
        keys=b.moe_keys(view, ("num_local_experts", "num_experts"), expert_intermediate="intermediate_size"),
    )
    notes = []
    if view.int("shared_intermediate_size", default=0, minimum=0):
        notes.append("shared_intermediate_size > 0: a shared expert exists but is not counted")
    layers = [
        LayerSpec(m, "moe", (attn if m == "attention" else lightning) + moe + b.norm(2 * h)) for m in mixers(view, n)
    ]
    return FamilyResult(
        layers=layers,
        hybrid_family="linear_attn",
        outside=b.embeddings(view.int("vocab_size", default=32000), h, view.bool("tie_word_embeddings", default=False)),
        notes=notes,
    )
