"""Qwen3-Next and Qwen3.5 (dense and MoE): gated DeltaNet layers with full attention every few.

`layer_types[i]` is `linear_attention` (gated DeltaNet) or `full_attention`; without it
transformers builds `full_attention` where (i + 1) % full_attention_interval == 0 (default 4).
Qwen3-Next's FFN is a sparse MoE iff num_experts > 0, i not in mlp_only_layers and
(i + 1) % decoder_sparse_step == 0; Qwen3.5 dense has only MLPs, Qwen3.5-MoE only MoE.
"""

from __future__ import annotations

from bringup.core.families import _blocks as b
from bringup.core.families._assemble import FamilyResult, LayerSpec
from bringup.core.families._view import ConfigView
from bringup.core.layermap.layer_geometry import GatedDeltaNetGeometry

MODEL_TYPES = ("qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text")
_TYPES = {"linear_attention": "gated_delta_net", "full_attention": "attention"}


def mixers(view: ConfigView, n: int) -> list[str]:
    if view.has("layer_types"):
        return view.per_layer("layer_types", n, _TYPES)
    interval = view.int("full_attention_interval", default=4)
    return ["attention" if (i + 1) % interval == 0 else "gated_delta_net" for i in range(n)]


def ffn_kinds(view: ConfigView, n: int) -> list[str]:
    model_type = view.data.get("model_type", "")
    if model_type.startswith("qwen3_5"):
        return ["moe" if "moe" in model_type else "mlp"] * n
    experts = view.int("num_experts", default=512, minimum=0)
    mlp_only = set(view.layer_ids("mlp_only_layers", n, default=[]))
    step = view.int("decoder_sparse_step", default=1)
    return ["moe" if experts > 0 and i not in mlp_only and (i + 1) % step == 0 else "mlp" for i in range(n)]


def gated_delta_net(view: ConfigView, h: int) -> b.Part:
    nk = view.int("linear_num_key_heads", default=16)
    nv = view.int("linear_num_value_heads", default=32)
    dk = view.int("linear_key_head_dim", default=128)
    dv = view.int("linear_value_head_dim", default=128)
    kernel = view.int("linear_conv_kernel_dim", default=4)
    key_dim, value_dim = nk * dk, nv * dv
    conv_dim = 2 * key_dim + value_dim
    params = (
        h * (2 * key_dim + 2 * value_dim)  # q, k, v, z
        + h * 2 * nv  # b, a
        + conv_dim * kernel  # depthwise conv, no bias
        + 2 * nv  # dt_bias, A_log
        + dv  # gated norm over the value head dim
        + value_dim * h
    )
    return b.Part(
        params=params,
        conv_elems=conv_dim * (kernel - 1),
        ssm_elems=nv * dk * dv,
        gated_delta_net=GatedDeltaNetGeometry(
            key_heads=nk, value_heads=nv, key_head_dim=dk, value_head_dim=dv, conv_kernel=kernel,
            keys=view.keys(key_heads="linear_num_key_heads", value_heads="linear_num_value_heads",
                           key_head_dim="linear_key_head_dim", value_head_dim="linear_value_head_dim",
                           conv_kernel="linear_conv_kernel_dim")),
    )


def build(view: ConfigView) -> FamilyResult:
    n = view.num_layers()
    h = view.int("hidden_size", default=2048)
    heads = view.int("num_attention_heads", default=16)
    kv_heads = view.int("num_key_value_heads", default=2)
    head_dim = view.int("head_dim", default=256)
    bias = view.bool("attention_bias", default=False)
    # The query projection is twice as wide: half of it gates the attention output.
    attn = b.attention(h, heads, kv_heads, head_dim, qkv_bias=bias, o_bias=bias, qk_norm=2 * head_dim,
                       keys=b.attention_keys(view))
    attn.params += h * heads * head_dim + (heads * head_dim if bias else 0)
    gdn = gated_delta_net(view, h)
    mlp = b.mlp(h, view.int("intermediate_size", default=5632))
    ffns = ffn_kinds(view, n)
    moe = None
    if "moe" in ffns:
        experts = view.int("num_experts", default=512)
        shared_inter = view.int("shared_expert_intermediate_size", default=512, minimum=0)
        moe_inter = view.int("moe_intermediate_size", default=512)
        moe = b.moe(
            h, experts, view.int("num_experts_per_tok", default=10),
            expert_params=b.gated_experts(h, moe_inter),
            router=experts * h,
            shared=b.mlp(h, shared_inter).params if shared_inter else 0,
            other=h if shared_inter else 0,  # the shared expert's sigmoid gate
            expert_intermediate=moe_inter, shared_intermediate=shared_inter, keys=b.moe_keys(view, "num_experts"),
        )
    norms = b.norm(2 * h)
    layers = []
    for mixer, ffn in zip(mixers(view, n), ffns):
        part = (attn if mixer == "attention" else gdn) + (moe if ffn == "moe" else mlp) + norms
        layers.append(LayerSpec(mixer, ffn, part))
    vocab = view.int("vocab_size", default=151936)
    return FamilyResult(
        layers=layers,
        hybrid_family="gdn",
        outside=b.embeddings(vocab, h, view.bool("tie_word_embeddings", default=False)),
    )
