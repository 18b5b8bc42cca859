"""Dense and MoE transformers with only softmax attention: Llama, Mistral, Qwen2/3, Granite, ...

Every layer is attention + SwiGLU MLP (or MoE for Mixtral / Qwen-MoE). Qwen2/3 switch layers at or
beyond `max_window_layers` to sliding attention only when `use_sliding_window` is true; Mistral
applies its `sliding_window` (when set) to every layer.
"""

from __future__ import annotations

from bringup.core.families import _blocks as b
from bringup.core.families._assemble import FamilyResult, LayerSpec
from bringup.core.families._view import ConfigView

MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3", "granite", "mixtral", "qwen2_moe", "qwen3_moe")
_TYPES = {"sliding_attention": "sliding_attention", "full_attention": "attention"}


def mixers(view: ConfigView, n: int, model_type: str) -> list[str]:
    if view.has("layer_types"):
        return view.per_layer("layer_types", n, _TYPES)
    window = view.int("sliding_window", default=0, minimum=0, maximum=1 << 40)
    if model_type.startswith(("qwen2", "qwen3")):
        if view.bool("use_sliding_window", default=False) and window:
            start = view.int("max_window_layers", default=n, minimum=0, maximum=1 << 20)
            return ["sliding_attention" if i >= start else "attention" for i in range(n)]
        return ["attention"] * n
    if model_type in ("mistral", "mixtral") and window:
        return ["sliding_attention"] * n
    return ["attention"] * n


def ffn_kinds(view: ConfigView, n: int, model_type: str) -> list[str]:
    if model_type == "mixtral":
        return ["moe"] * n
    if model_type in ("qwen2_moe", "qwen3_moe"):
        mlp_only = set(view.layer_ids("mlp_only_layers", n, default=[]))
        step = view.int("decoder_sparse_step", default=1)
        experts = view.int("num_experts", default=60, minimum=0)
        return ["moe" if experts and i not in mlp_only and (i + 1) % step == 0 else "mlp" for i in range(n)]
    return ["mlp"] * n


def build(view: ConfigView) -> FamilyResult:
    model_type = view.data.get("model_type", "")
    n = view.num_layers()
    h = view.int("hidden_size", default=4096)
    heads = view.int("num_attention_heads", default=32)
    kv_heads = view.int("num_key_value_heads", default=heads)
    head_dim = view.int("head_dim", default=max(1, h // heads))
    window = view.int("sliding_window", default=0, minimum=0, maximum=1 << 40)
    qkv_bias = view.bool("attention_bias", default=model_type.startswith("qwen2"))
    o_bias = qkv_bias and not model_type.startswith("qwen2")  # Qwen2 biases q, k, v only
    qk_norm = 2 * head_dim if model_type.startswith("qwen3") else 0
    mlp_bias = view.bool("mlp_bias", default=False)
    ffns = ffn_kinds(view, n, model_type)
    mlp = b.mlp(h, view.int("intermediate_size", default=11008), bias=mlp_bias)
    moe = None
    if "moe" in ffns:
        experts = view.int("num_local_experts", "num_experts", default=8)
        moe_inter = view.int("moe_intermediate_size", "intermediate_size", default=1408)
        shared_inter = view.int("shared_expert_intermediate_size", default=0, minimum=0)
        moe = b.moe(
            h, experts, view.int("num_experts_per_tok", default=2),
            expert_params=b.gated_experts(h, moe_inter),
            router=experts * h,
            shared=b.mlp(h, shared_inter).params + h if shared_inter else 0,  # shared expert and its gate
            expert_intermediate=moe_inter, shared_intermediate=shared_inter,
            keys=b.moe_keys(view, ("num_local_experts", "num_experts"),
                            expert_intermediate=("moe_intermediate_size", "intermediate_size")),
        )
    layers = []
    for m, f in zip(mixers(view, n, model_type), ffns):
        attn = b.attention(h, heads, kv_heads, head_dim, qkv_bias=qkv_bias, o_bias=o_bias, qk_norm=qk_norm,
                           window=window if m == "sliding_attention" else None, keys=b.attention_keys(view))
        layers.append(LayerSpec(m, f, attn + (moe if f == "moe" else mlp) + b.norm(2 * h)))
    return FamilyResult(
        layers=layers,
        hybrid_family=None,
        outside=b.embeddings(view.int("vocab_size", default=32000), h, view.bool("tie_word_embeddings", default=False)),
    )
