"""LFM2: gated short-convolution layers with GQA attention (QK-norm) in between; SwiGLU MLP in all.

`layer_types[i]` is `conv` or `full_attention`; older configs list the attention layers in
`full_attn_idxs` instead. A short conv keeps only a conv state per request (`conv_L_cache - 1`
taps of `hidden_size` channels), no SSM state. `block_ff_dim` overrides `intermediate_size`, and
`block_auto_adjust_ff_dim` shrinks it (2/3, times the multiplier, rounded up to `block_multiple_of`).
"""

from __future__ import annotations

from bringup.core.families import _blocks as b
from bringup.core.families._assemble import FamilyResult, LayerSpec
from bringup.core.families._view import ConfigView
from bringup.core.layermap.layer_geometry import ShortConvGeometry

MODEL_TYPES = ("lfm2",)
_TYPES = {"conv": "short_conv", "short_conv": "short_conv", "full_attention": "attention", "attention": "attention"}


def mixers(view: ConfigView) -> list[str]:
    if view.has("layer_types"):
        types = view.list("layer_types", item=str)
        if not types or any(t not in _TYPES for t in types):
            raise view.bad("layer_types", types, "a list of conv | full_attention")
        if view.has("num_hidden_layers") and view.num_layers() != len(types):
            raise view.bad("layer_types", types, f"{view.num_layers()} entries (num_hidden_layers)")
        return [_TYPES[t] for t in types]
    n = view.num_layers()
    attn = set(view.layer_ids("full_attn_idxs", n, default=list(range(n))))
    return ["attention" if i in attn else "short_conv" for i in range(n)]


def ffn_width(view: ConfigView) -> int:
    inter = view.int("block_ff_dim", "intermediate_size", default=12288)
    if view.bool("block_auto_adjust_ff_dim", default=True):
        inter = int(2 * inter / 3)
        multiplier = view.float("block_ffn_dim_multiplier", default=1.0)
        if view.data.get("block_ffn_dim_multiplier", 1.0) is not None:
            multiple = view.int("block_multiple_of", default=256)
            inter = int(multiplier * inter)
            inter = multiple * ((inter + multiple - 1) // multiple)
    if inter < 1:
        raise view.bad("block_ff_dim", inter, "a feed-forward width that stays positive after block_auto_adjust_ff_dim")
    return inter


def build(view: ConfigView) -> FamilyResult:
    h = view.int("hidden_size", "block_dim", default=2560)
    heads = view.int("num_attention_heads", "num_heads", default=32)
    kv_heads = view.int("num_key_value_heads", default=8)
    b.check_divisible(view, "hidden_size", h, heads, "hidden_size / num_attention_heads")
    head_dim = h // heads
    kernel = view.int("conv_L_cache", default=3)
    bias = view.bool("conv_bias", default=False)
    conv = b.Part(
        params=b.linear(h, 3 * h, bias) + h * kernel + (h if bias else 0) + b.linear(h, h, bias),
        conv_elems=h * (kernel - 1),
        short_conv=ShortConvGeometry(channels=h, conv_kernel=kernel,
                                     keys=view.keys(channels=("hidden_size", "block_dim"), conv_kernel="conv_L_cache")),
    )
    attn = b.attention(h, heads, kv_heads, head_dim, qk_norm=2 * head_dim,
                       keys=b.attention_keys(view, heads=("num_attention_heads", "num_heads"), head_dim="hidden_size"))
    mlp = b.mlp(h, ffn_width(view), key=view.key("block_ff_dim", "intermediate_size"))
    layers = [LayerSpec(m, "mlp", (attn if m == "attention" else conv) + mlp + b.norm(2 * h)) for m in mixers(view)]
    tied = view.bool("tie_embedding", "tie_word_embeddings", default=True)
    return FamilyResult(
        layers=layers,
        hybrid_family="mamba2",  # SGLang routes LFM2 through its mamba2 config (conv state only)
        outside=b.embeddings(view.int("vocab_size", default=65536), h, tied),
    )
