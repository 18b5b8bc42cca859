"""Gemma 4 text decoder: sliding and full attention, KV-sharing layers, a MoE beside the dense MLP.

Counted as transformers 5's `Gemma4TextConfig` / `modeling_gemma4.py` builds it:
- `layer_types` explicit, or 5 sliding then 1 full; the last layer is forced to full attention.
- Full layers use `global_head_dim` (default 512); with `attention_k_eq_v` they also use
  `num_global_key_value_heads` and have no v_proj (V comes from the K projection).
- The last `num_kv_shared_layers` layers reuse the KV cache of the last earlier layer of the same
  type: no k/v projections or norms of their own and no cache; with `use_double_wide_mlp` their MLP
  is twice as wide.
- `enable_moe_block`: every layer runs the dense MLP *and* a routed MoE (`num_experts`,
  `top_k_experts`, `moe_intermediate_size`) side by side, with a router (projection, scale,
  per-expert scale) and three more norms.
- A config saved by transformers 5 carries `per_layer_config` ({layer: {head_dim, num_key_value_heads}})
  instead of `global_head_dim` / `num_global_key_value_heads`; then only the layers it names differ.
- `hidden_size_per_layer_input`: per-layer input embeddings, a packed table and projection outside
  the stack, a gate and projection inside every layer.
"""

from __future__ import annotations

import dataclasses

from bringup.core.errors import UserError
from bringup.core.families import _blocks as b
from bringup.core.families._assemble import FamilyResult, LayerSpec
from bringup.core.families._view import ConfigView
from bringup.core.layermap.layer_geometry import AttentionGeometry

MODEL_TYPES = ("gemma4", "gemma4_text")
_TYPES = {"sliding_attention": "sliding_attention", "full_attention": "attention"}
PATTERN = 6  # transformers' default: 5 sliding, then 1 full


def mixers(view: ConfigView, n: int, notes: list[str]) -> list[str]:
    if view.has("layer_types"):
        kinds = view.per_layer("layer_types", n, _TYPES)
    else:
        kinds = ["attention" if (i + 1) % PATTERN == 0 else "sliding_attention" for i in range(n)]
    if kinds[-1] != "attention":
        notes.append("the last layer is full attention, as Gemma 4 requires (transformers forces it)")
        kinds[-1] = "attention"
    return kinds


def kv_sources(view: ConfigView, kinds: list[str]) -> list[int | None]:
    """For each layer, the layer whose KV cache it reads (None: it keeps its own)."""
    n = len(kinds)
    shared = view.int("num_kv_shared_layers", default=0, minimum=0, maximum=n)
    if not shared:
        return [None] * n
    first = n - shared
    if first == 0:
        raise view.bad("num_kv_shared_layers", shared,
                       f"fewer than num_hidden_layers ({n}): some layer must keep the KV cache the others reuse")
    sources: list[int | None] = [None] * first
    for i in range(first, n):
        producers = [j for j in range(first) if kinds[j] == kinds[i]]
        if not producers:
            raise UserError(
                f"{view.label}: layer {i} ({kinds[i]}) reuses KV (num_kv_shared_layers={shared}) but no earlier "
                f"layer of that type keeps one; transformers refuses this config too. Fix layer_types or "
                "num_kv_shared_layers in config.json"
            )
        sources.append(producers[-1])
    return sources


def layer_shapes(view: ConfigView, kinds: list[str], head_dim: int, kv_heads: int) -> list[tuple[int, int]]:
    """(head_dim, kv_heads) of every layer: full layers widen, from per_layer_config or the global_* fields."""
    n = len(kinds)
    if view.has("per_layer_config"):
        shapes = [(head_dim, kv_heads)] * n
        for key, override in view.dict("per_layer_config").items():
            index = int(key) if isinstance(key, str) and key.isdigit() else key
            if not isinstance(index, int) or not 0 <= index < n:
                raise view.bad("per_layer_config", key, f"layer ids within the model's {n} layers")
            layer = ConfigView(override, f"{view.label} (per_layer_config {key})")
            shapes[index] = (layer.int("head_dim", default=head_dim), layer.int("num_key_value_heads", default=kv_heads))
        return shapes
    global_head_dim = view.int("global_head_dim", default=512)
    k_eq_v = view.bool("attention_k_eq_v", default=False)
    global_kv_heads = view.int("num_global_key_value_heads", default=kv_heads) if k_eq_v else kv_heads
    return [(head_dim, kv_heads) if k == "sliding_attention" else (global_head_dim, global_kv_heads) for k in kinds]


def _attention(view: ConfigView, h: int, heads: int, kv_heads: int, head_dim: int, *, k_eq_v: bool, shared: bool,
               bias: bool, window: int | None) -> b.Part:
    p = b.linear(h, heads * head_dim, bias) + head_dim  # q_proj, q_norm
    if not shared:
        p += b.linear(h, kv_heads * head_dim, bias) + head_dim  # k_proj, k_norm (v_norm has no weight)
        if not k_eq_v:
            p += b.linear(h, kv_heads * head_dim, bias)  # v_proj
    p += b.linear(heads * head_dim, h, bias)  # o_proj
    geometry = AttentionGeometry(heads=heads, kv_heads=kv_heads, head_dim=head_dim, window=window or None, k_eq_v=k_eq_v,
                                 keys=view.keys(heads="num_attention_heads", kv_heads="num_key_value_heads",
                                                head_dim="head_dim"))
    return b.Part(params=p, kv_elems=2 * kv_heads * head_dim, attention=geometry)


def _moe(view: ConfigView, h: int) -> b.Part:
    experts = view.int("num_experts")
    top_k = view.int("top_k_experts", maximum=experts)
    inter = view.int("moe_intermediate_size")
    router = b.linear(h, experts) + h + experts  # proj, scale, per-expert scale (its norm has no weight)
    part = b.moe(h, experts, top_k, expert_params=b.gated_experts(h, inter), router=router, other=3 * h,  # 3 norms
                 expert_intermediate=inter, keys=b.moe_keys(view, "num_experts", "top_k_experts"))
    part.moe = dataclasses.replace(part.moe, dense_mlp_alongside=True)  # the dense MLP runs beside it
    return part


def build(view: ConfigView) -> FamilyResult:
    notes: list[str] = []
    n = view.num_layers()
    h = view.int("hidden_size", default=2304)
    heads = view.int("num_attention_heads", default=8)
    kv_heads = view.int("num_key_value_heads", default=4)
    head_dim = view.int("head_dim", default=256)
    k_eq_v = view.bool("attention_k_eq_v", default=False)
    window = view.int("sliding_window", default=512, maximum=1 << 40)
    bias = view.bool("attention_bias", default=False)
    inter = view.int("intermediate_size", default=9216)
    double_wide = view.bool("use_double_wide_mlp", default=False)
    moe = _moe(view, h) if view.bool("enable_moe_block", default=False) else None
    width = view.int("hidden_size_per_layer_input", default=256, minimum=0)
    per_layer = b.Part(params=2 * h * width + h) if width else b.Part()  # input gate, projection, norm

    kinds = mixers(view, n, notes)
    sources = kv_sources(view, kinds)
    layers = []
    for kind, source, (dim, kv) in zip(kinds, sources, layer_shapes(view, kinds, head_dim, kv_heads)):
        sliding = kind == "sliding_attention"
        attn = _attention(view, h, heads, kv, dim, k_eq_v=k_eq_v and not sliding, shared=source is not None, bias=bias,
                          window=window if sliding else None)
        mlp = b.mlp(h, inter * (2 if double_wide and source is not None else 1))
        part = attn + mlp + b.norm(4 * h) + per_layer  # pre/post attention and pre/post feed-forward norms
        if moe is not None:
            part = part + moe
        layers.append(LayerSpec(kind, "moe" if moe is not None else "mlp", part, kv_shared_from=source))
    if any(s is not None for s in sources):
        first = sources.index(next(s for s in sources if s is not None))
        notes.append(f"layers {first}-{n - 1} reuse the KV cache of earlier layers and keep none of their own")

    vocab = view.int("vocab_size", default=262144)
    outside = b.embeddings(vocab, h, view.bool("tie_word_embeddings", default=True))
    if width:
        vocab_pl = view.int("vocab_size_per_layer_input", default=262144)
        # The packed per-layer table, the model-side projection into it, and its norm.
        outside = outside + b.Part(params=vocab_pl * n * width + h * n * width + width)
    return FamilyResult(layers=layers, hybrid_family=None, outside=outside, notes=notes)
