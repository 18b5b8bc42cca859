"""Sliding-window attention families: gpt-oss and Gemma 2 / 3 (Gemma 4 has its own module, gemma4.py).

gpt-oss: explicit `layer_types` (sliding first, alternating; default the same), an MoE with
biases in every layer, and per-head attention sinks. Gemma 2: alternating, sliding first.
Gemma 3: without `layer_types`, 5 sliding then 1 full (`sliding_window_pattern`, default 6).
A sliding layer's KV grows with the window, not the context.
"""

from __future__ import annotations

from bringup.core.families import _blocks as b
from bringup.core.families._assemble import FamilyResult, LayerSpec
from bringup.core.families._view import ConfigView

MODEL_TYPES = ("gpt_oss", "gemma2", "gemma3_text", "gemma3")
_TYPES = {"sliding_attention": "sliding_attention", "full_attention": "attention"}


def mixers(view: ConfigView, n: int, model_type: str) -> list[str]:
    if view.has("layer_types"):
        return view.per_layer("layer_types", n, _TYPES)
    if model_type.startswith("gemma3"):
        pattern = view.int("sliding_window_pattern", default=6)
    else:
        pattern = 2  # gpt-oss and Gemma 2 alternate
    return ["attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(n)]


def build(view: ConfigView) -> FamilyResult:
    model_type = view.data.get("model_type", "")
    n = view.num_layers()
    h = view.int("hidden_size", default=2304)
    heads = view.int("num_attention_heads", default=8)
    kv_heads = view.int("num_key_value_heads", default=heads)
    head_dim = view.int("head_dim", default=max(1, h // heads))
    window = view.int("sliding_window", default=4096, maximum=1 << 40)
    bias = view.bool("attention_bias", default=model_type == "gpt_oss")
    notes: list[str] = []
    if model_type == "gpt_oss":
        experts = view.int("num_local_experts", default=32)
        inter = view.int("intermediate_size", default=2880)
        ffn_kind = "moe"
        ffn = b.moe(
            h, experts, view.int("num_experts_per_tok", "experts_per_token", default=4),
            expert_params=2 * h * inter + 2 * inter + inter * h + h,  # gate_up and down, with biases
            router=experts * h + experts,
            expert_intermediate=inter,
            keys=b.moe_keys(view, "num_local_experts", ("num_experts_per_tok", "experts_per_token"), "intermediate_size"),
        )
        norms, qk_norm, sinks = 2 * h, 0, True
    else:
        ffn_kind = "mlp"
        ffn = b.mlp(h, view.int("intermediate_size", default=9216))
        norms, sinks = 4 * h, False  # pre/post attention and pre/post feed-forward
        qk_norm = 0 if model_type == "gemma2" else 2 * head_dim
    layers = []
    for m in mixers(view, n, model_type):
        attn = b.attention(h, heads, kv_heads, head_dim, qkv_bias=bias, o_bias=bias, qk_norm=qk_norm, sinks=sinks,
                           window=window if m == "sliding_attention" else None, keys=b.attention_keys(view))
        layers.append(LayerSpec(m, ffn_kind, attn + ffn + b.norm(norms)))
    tied = view.bool("tie_word_embeddings", default=model_type != "gpt_oss")
    outside = b.embeddings(view.int("vocab_size", default=262144), h, tied)
    return FamilyResult(layers=layers, hybrid_family=None, outside=outside, notes=notes)
