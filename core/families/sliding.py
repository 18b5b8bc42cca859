"""Sliding-window attention families: gpt-oss and Gemma 2 / 3 / 4.

gpt-oss: explicit `layer_types` (sliding first, alternating; default the same), an MoE with
biases in every layer, and per-head attention sinks. Gemma 2: alternating, sliding first.
Gemma 3: without `layer_types`, 5 sliding then 1 full (`sliding_window_pattern`, default 6).
Gemma 4 configs carry explicit `layer_types` inside `text_config`; its full-attention layers may use
a wider `global_head_dim`. A sliding layer's KV grows with the window, not the context.
"""

from __future__ import annotations

from bringup.core.families import _blocks as b
from bringup.core.families._assemble import FamilyResult, LayerSpec
from bringup.core.families._view import ConfigView

MODEL_TYPES = ("gpt_oss", "gemma2", "gemma3_text", "gemma3", "gemma4_text", "gemma4")
_TYPES = {"sliding_attention": "sliding_attention", "full_attention": "attention"}


def mixers(view: ConfigView, n: int, model_type: str) -> list[str]:
    if view.has("layer_types"):
        return view.per_layer("layer_types", n, _TYPES)
    if model_type.startswith("gemma3"):
        pattern = view.int("sliding_window_pattern", default=6)
    elif model_type.startswith("gemma4"):
        pattern = 6
    else:
        pattern = 2  # gpt-oss and Gemma 2 alternate
    return ["attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(n)]


def gemma4_last_layer_full(kinds: list[str], notes: list[str]) -> list[str]:
    """transformers' Gemma 4 forces the last layer to full attention."""
    if kinds and kinds[-1] != "attention":
        notes.append("the last layer is full attention, as Gemma 4 requires (transformers forces it)")
        kinds = kinds[:-1] + ["attention"]
    return kinds


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
        )
        norms, qk_norm, sinks = 2 * h, 0, heads
    else:
        ffn_kind = "mlp"
        ffn = b.mlp(h, view.int("intermediate_size", default=9216))
        norms, sinks = 4 * h, 0  # pre/post attention and pre/post feed-forward
        qk_norm = 0 if model_type == "gemma2" else 2 * head_dim
        if model_type.startswith("gemma4"):
            notes.append("Gemma 4 parameter count is approximate: KV-sharing layers, attention_k_eq_v and the MoE variant are not modelled")
    kinds = mixers(view, n, model_type)
    global_head_dim, global_kv_heads = head_dim, kv_heads
    if model_type.startswith("gemma4"):
        kinds = gemma4_last_layer_full(kinds, notes)
        # Full-attention layers use their own head dim (default 512) and, with attention_k_eq_v, KV heads.
        global_head_dim = view.int("global_head_dim", default=512)
        if view.bool("attention_k_eq_v", default=True):
            global_kv_heads = view.int("num_global_key_value_heads", default=kv_heads)
    # Gemma 4's per-layer inputs: a second embedding table feeding every layer a small vector.
    per_layer, per_layer_outside = b.Part(), 0
    width = view.int("hidden_size_per_layer_input", default=256, minimum=0) if model_type.startswith("gemma4") else 0
    if width:
        per_layer = b.Part(params=2 * h * width + h)  # input gate, projection, norm
        vocab_pl = view.int("vocab_size_per_layer_input", default=view.int("vocab_size", default=262144))
        per_layer_outside = vocab_pl * len(kinds) * width + h * len(kinds) * width + width
    layers = []
    for m in kinds:
        sliding = m == "sliding_attention"
        dim = head_dim if sliding else global_head_dim
        qk = qk_norm if dim == head_dim else 2 * dim
        attn = b.attention(h, heads, kv_heads if sliding else global_kv_heads, dim, qkv_bias=bias, o_bias=bias,
                           qk_norm=qk, extra=sinks, window=window if sliding else None)
        layers.append(LayerSpec(m, ffn_kind, attn + ffn + b.norm(norms) + per_layer))
    if model_type.startswith("gemma4") and view.int("num_kv_shared_layers", default=0, minimum=0):
        notes.append(f"the last {view.int('num_kv_shared_layers', minimum=0)} layers reuse earlier layers' KV cache")
    tied = view.bool("tie_word_embeddings", default=model_type != "gpt_oss")
    outside = b.embeddings(view.int("vocab_size", default=262144), h, tied)
    outside.params += per_layer_outside
    return FamilyResult(layers=layers, hybrid_family=None, outside=outside, notes=notes)
