"""Kimi-Linear: Kimi Delta Attention (KDA) layers with MLA full attention in between.

`linear_attn_config.full_attn_layers` and `.kda_layers` are **1-based** layer numbers. A layer in
neither list is full attention (SGLang: only the KDA layers are linear). FFN: MoE iff
i >= first_k_dense_replace and i % moe_layer_freq == 0, else a dense SwiGLU MLP; an explicit
`mlp_layer_types` (dense | sparse), as transformers v5 writes it, wins.
"""

from __future__ import annotations

from bringup.core.families import _blocks as b
from bringup.core.families._assemble import FamilyResult, LayerSpec
from bringup.core.families._view import ConfigView
from bringup.core.layermap.layer_geometry import AttentionGeometry, KimiDeltaGeometry, LatentKV

MODEL_TYPES = ("kimi_linear",)


def mixers(view: ConfigView, n: int, linear: ConfigView | None, notes: list[str]) -> list[str]:
    if view.has("layer_types"):
        return view.per_layer("layer_types", n, {"linear_attention": "kimi_delta_attention", "full_attention": "attention"})
    if linear is None:
        notes.append("no linear_attn_config: KDA everywhere but every 4th layer (transformers' default)")
        return ["attention" if i and i % 4 == 0 else "kimi_delta_attention" for i in range(n)]
    kda = set(linear.layer_ids("kda_layers", n, one_based=True, default=[]))
    full = set(linear.layer_ids("full_attn_layers", n, one_based=True, default=[]))
    both = kda & full
    if both:
        raise linear.bad("kda_layers", sorted(i + 1 for i in both), "layers not also listed in full_attn_layers")
    return ["kimi_delta_attention" if i in kda else "attention" for i in range(n)]


def ffn_kinds(view: ConfigView, n: int) -> list[str]:
    if view.has("mlp_layer_types"):
        return view.per_layer("mlp_layer_types", n, {"dense": "mlp", "sparse": "moe"})
    first_dense = view.int("first_k_dense_replace", default=1, minimum=0)
    freq = view.int("moe_layer_freq", default=1)
    experts = view.int("num_experts", "num_local_experts", default=256, minimum=0)
    return ["moe" if experts and i >= first_dense and i % freq == 0 else "mlp" for i in range(n)]


def mla(view: ConfigView, h: int) -> b.Part:
    heads = view.int("num_attention_heads", default=32)
    q_rank = view.int("q_lora_rank", default=0, minimum=0)
    kv_rank = view.int("kv_lora_rank", default=512)
    nope = view.int("qk_nope_head_dim", default=128)
    rope = view.int("qk_rope_head_dim", default=64)
    v_dim = view.int("v_head_dim", default=128)
    bias = view.bool("attention_bias", default=False)
    qk = nope + rope
    q = b.linear(h, q_rank, bias) + q_rank + q_rank * heads * qk if q_rank else h * heads * qk
    params = (
        q
        + b.linear(h, kv_rank + rope, bias)  # kv_a_proj_with_mqa
        + kv_rank  # kv_a_layernorm
        + kv_rank * heads * (nope + v_dim)  # kv_b_proj
        + b.linear(heads * v_dim, h, bias)
    )
    # SGLang's MLA pool keeps the compressed latent and the rope key: one vector per token.
    geometry = AttentionGeometry(heads=heads, kv_heads=None, head_dim=qk, v_head_dim=v_dim,
                                 latent=LatentKV(kv_lora_rank=kv_rank, qk_rope_head_dim=rope, q_lora_rank=q_rank),
                                 keys=view.keys(heads="num_attention_heads", head_dim="qk_nope_head_dim"))
    return b.Part(params=params, kv_elems=kv_rank + rope, attention=geometry)


def kda(linear: ConfigView | None, view: ConfigView, h: int) -> b.Part:
    src = linear or view
    heads = src.int("num_heads", default=view.int("linear_num_heads", default=32))
    dim = src.int("head_dim", default=view.int("linear_head_dim", default=128))
    kernel = src.int("short_conv_kernel_size", default=view.int("linear_conv_kernel_dim", default=4))
    width = heads * dim
    params = (
        3 * h * width  # q, k, v
        + 3 * width * kernel  # short conv over q, k, v
        + h * dim + dim * width + width + heads  # forget gate: f_a, f_b, dt_bias, A_log
        + h * heads  # beta
        + h * dim + dim * width  # output gate g_a, g_b
        + dim  # gated output norm
        + width * h
    )
    return b.Part(params=params, conv_elems=3 * width * (kernel - 1), ssm_elems=heads * dim * dim,
                  kda=KimiDeltaGeometry(heads=heads, head_dim=dim, conv_kernel=kernel, keys=kda_keys(linear, view)))


def kda_keys(linear: ConfigView | None, view: ConfigView) -> dict:
    if linear is not None:
        return {name: f"linear_attn_config.{key}" for name, key in
                linear.keys(heads="num_heads", head_dim="head_dim", conv_kernel="short_conv_kernel_size").items()}
    return view.keys(heads="linear_num_heads", head_dim="linear_head_dim", conv_kernel="linear_conv_kernel_dim")


def build(view: ConfigView) -> FamilyResult:
    notes: list[str] = []
    n = view.num_layers()
    h = view.int("hidden_size", default=2304)
    linear = view.sub("linear_attn_config") if view.has("linear_attn_config") else None
    experts = view.int("num_experts", "num_local_experts", default=256, minimum=0)
    moe_inter = view.int("moe_intermediate_size", default=1024)
    grouped = view.bool("use_grouped_topk", default=True)
    shared = view.int("num_shared_experts", "n_shared_experts", default=1, minimum=0)
    moe = b.moe(
        h, experts, view.int("num_experts_per_token", "num_experts_per_tok", default=8),
        expert_params=b.gated_experts(h, moe_inter),
        router=experts * h,
        shared=b.mlp(h, moe_inter * shared).params if shared else 0,
        expert_intermediate=moe_inter, shared_intermediate=moe_inter * shared,
        groups=view.int("num_expert_group", "n_group", default=1, minimum=0) if grouped else 1,
        topk_groups=view.int("topk_group", default=1, minimum=0) if grouped else 1,
        keys=dict(b.moe_keys(view, ("num_experts", "num_local_experts"), ("num_experts_per_token", "num_experts_per_tok")),
                  groups=view.key("num_expert_group", "n_group"), topk_groups="topk_group"),
    ) if experts else None
    parts = {
        "attention": mla(view, h),
        "kimi_delta_attention": kda(linear, view, h),
        "mlp": b.mlp(h, view.int("intermediate_size", default=9216)),
        "moe": moe,
    }
    layers = [
        LayerSpec(m, f, parts[m] + parts[f] + b.norm(2 * h))
        for m, f in zip(mixers(view, n, linear, notes), ffn_kinds(view, n))
    ]
    return FamilyResult(
        layers=layers,
        hybrid_family="kimi_linear",
        outside=b.embeddings(view.int("vocab_size", default=163840), h, view.bool("tie_word_embeddings", default=False)),
        notes=notes,
    )
