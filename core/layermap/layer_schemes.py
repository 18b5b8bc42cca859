"""The weight scheme of each layer of a map, and the weight bytes they add up to.

A layer's mixer and FFN are named by the checkpoint's module names (`model.layers.N.self_attn`,
NemotronH's `backbone.layers.N.mixer`), and each name is looked up in the checkpoint's quantization
(`quantization.ModelQuantization.scheme_for`): so an `exclude_modules` entry, a MIXED_PRECISION
table or a GGUF file's per-tensor types show on the layers they touch.
"""

from __future__ import annotations

from .dtypes import model_dtype
from .quantization import LayerSchemes, ModelQuantization, WeightScheme, dense, read_quantization
from .vocabulary import Layer, LayerMap

# A representative weight of each mixer / FFN, after the layer prefix (first: the common HF name).
_MIXER_MODULES = {
    "attention": ("self_attn.o_proj", "self_attn.q_proj", "attention.o_proj"),
    "sliding_attention": ("self_attn.o_proj", "self_attn.q_proj"),
    "sparse_attention": ("self_attn.o_proj",),
    "attention+mamba2": ("self_attn.o_proj",),
    "mamba2": ("mamba.in_proj", "mamba.out_proj", "mixer.in_proj"),
    "mamba": ("mamba.in_proj", "mamba.out_proj"),
    "gated_delta_net": ("linear_attn.out_proj", "linear_attn.in_proj_qkvz", "linear_attn.in_proj_qkv"),
    "kimi_delta_attention": ("self_attn.o_proj",),
    "lightning_attention": ("self_attn.out_proj",),
    "short_conv": ("conv.out_proj", "conv.in_proj"),
}
_FFN_MODULES = {
    "mlp": ("mlp.down_proj", "mlp.up_proj", "feed_forward.down_proj", "feed_forward.w2"),
    "moe": ("mlp.experts.0.down_proj", "mlp.experts.0.up_proj", "feed_forward.experts.0.down_proj",
            "block_sparse_moe.experts.0.w2", "mlp.experts"),
}
# NemotronH: every block is `backbone.layers.N.mixer`, whichever kind it is.
_NEMOTRON_H = {"attention": ("mixer.o_proj", "mixer.q_proj"), "mamba2": ("mixer.in_proj", "mixer.out_proj"),
               "mlp": ("mixer.down_proj", "mixer.up_proj"), "moe": ("mixer.experts.0.down_proj", "mixer.experts.0.up_proj")}


def _prefixes(model_type: str, index: int) -> tuple[str, ...]:
    if model_type == "nemotron_h":
        return (f"backbone.layers.{index}",)
    return (f"model.layers.{index}", f"model.language_model.layers.{index}")


def _scheme(quant: ModelQuantization, names: list[str]) -> WeightScheme:
    """The scheme of the first name the checkpoint says anything specific about, else the first name's."""
    for name in names:
        for pattern, scheme in quant.modules:
            if name == pattern or name.startswith(pattern + ".") or pattern == name.removesuffix(".weight"):
                return scheme
    return quant.scheme_for(names[0])


def schemes_of_layer(model_type: str, layer: Layer, quant: ModelQuantization) -> LayerSchemes:
    """The schemes of one layer's mixer and FFN weights, looked up by the checkpoint's module names."""
    table = _NEMOTRON_H if model_type == "nemotron_h" else None

    def of(kind: str, modules: dict) -> WeightScheme | None:
        if kind == "none":
            return None
        suffixes = (table or {}).get(kind) or modules.get(kind) or ("",)
        return _scheme(quant, [f"{p}.{s}" for p in _prefixes(model_type, layer.index) for s in suffixes])

    return LayerSchemes(layer.index, of(layer.mixer, _MIXER_MODULES), of(layer.ffn, _FFN_MODULES))


def layer_schemes(m: LayerMap, quant: ModelQuantization | None = None) -> list[LayerSchemes]:
    """Each layer's schemes: those the map carries (`Layer.weights`), else read from the config
    (a dense checkpoint: its dtype everywhere)."""
    if quant is None and all(l.weights is not None for l in m.layers):
        return [l.weights for l in m.layers]
    quant = quant if quant is not None else read_quantization(m.config)
    if quant is None:
        d = dense(model_dtype(m.config))
        return [LayerSchemes(l.index, d if l.mixer != "none" else None, d if l.ffn != "none" else None) for l in m.layers]
    return [schemes_of_layer(m.model_type, layer, quant) for layer in m.layers]


def _ffn_params(m: LayerMap, layer: Layer) -> int:
    """The FFN's share of a layer holding both a mixer and an FFN (from its facts where known)."""
    hidden = int(m.config.get("hidden_size") or 0)
    inter = layer.mlp.intermediate if layer.mlp is not None else None
    if layer.ffn == "mlp" and hidden and inter:
        return min(layer.params, 3 * hidden * int(inter))
    if layer.ffn == "moe":  # experts dominate: what the mixer holds is a few projections of hidden^2
        return max(0, layer.params - 4 * hidden * hidden)
    return layer.params // 2


def weights_bytes(m: LayerMap, quant: ModelQuantization | None = None, *, dtype: str | None = None) -> int:
    """Bytes of the weights as the checkpoint stores them: each layer's params at its scheme's bits,
    the rest (embeddings, lm_head, final norm) at the embedding's scheme."""
    quant = quant if quant is not None else read_quantization(m.config)
    if quant is None:
        from .dtypes import dtype_bytes

        return m.params_total * dtype_bytes(dtype or model_dtype(m.config))
    total = 0.0
    for layer, s in zip(m.layers, layer_schemes(m, quant)):
        if s.mixer and s.ffn and s.mixer != s.ffn:
            ffn = _ffn_params(m, layer)
            total += (layer.params - ffn) * s.mixer.bits / 8 + ffn * s.ffn.bits / 8
        else:
            total += layer.params * (s.mixer or s.ffn or dense()).bits / 8
    outside = m.params_total - sum(l.params for l in m.layers)
    embed = quant.scheme_for("model.embed_tokens")
    return int(total + max(0, outside) * embed.bits / 8)


def quantization_json(m: LayerMap) -> dict | None:
    """`inspect --json`'s `quantization`: the checkpoint's schemes, each layer's, the weight bytes."""
    quant = read_quantization(m.config)
    if quant is None:
        return None
    doc = quant.to_json()
    doc["layers"] = [s.to_json() for s in layer_schemes(m, quant)]
    doc["weights_bytes"] = weights_bytes(m, quant)
    return doc


def quantization_summary(m: LayerMap) -> str | None:
    """One line for `inspect` and the details panel: 'fp8 (fp8_e4m3, fp32 per 128x128 block); 52 layers, ...'."""
    quant = read_quantization(m.config)
    if quant is None:
        return None
    from collections import Counter

    counts = Counter(s.label for s in layer_schemes(m, quant))
    per_layer = ", ".join(f"{n} layer{'s' if n > 1 else ''} {label}" for label, n in counts.most_common())
    return f"{quant.method}: {per_layer}"
