"""What the map says about a layer, in words: tooltip text and the details panel's rows.

Byte figures use the defaults an engine starts with: bf16 KV cache and conv state, fp32 SSM state
(SGLang's `--mamba-ssm-dtype float32`), at TP 1.
"""

from __future__ import annotations

from bringup.app.layermap.style import FFN_NAMES, MIXER_NAMES
from bringup.core.layermap.provenance import fact_sources, read_by
from bringup.core.layermap.vocabulary import Layer, LayerMap
from bringup.core.layermap.sizes import format_bytes

KV_BYTES = 2  # bf16
CONV_BYTES = 2  # bf16
SSM_BYTES = 4  # fp32


def human_count(n: int | None) -> str:
    """Three significant digits in the largest unit that keeps the number under 1000 once rounded:
    999,885,952 is "1.00 B", not "1e+03 M"."""
    if n is None:
        return "—"
    units = ((1e3, "K"), (1e6, "M"), (1e9, "B"), (1e12, "T"))
    fitting = [i for i, (size, _) in enumerate(units) if abs(n) >= size]
    if not fitting:
        return str(n)
    i = fitting[-1]
    text = _three_digits(n / units[i][0])
    if abs(float(text)) >= 1000 and i + 1 < len(units):  # 999,999 rounds to "1000 K": say "1.00 M"
        i += 1
        text = _three_digits(n / units[i][0])
    return f"{text} {units[i][1]}"


def _three_digits(v: float) -> str:
    """3 significant digits, trailing zeros kept (1.00, 31.6, 358), never an exponent."""
    a = abs(v)
    decimals = 2 if a < 9.995 else 1 if a < 99.95 else 0
    return f"{v:.{decimals}f}"


def kv_bytes_per_token(layer: Layer) -> int:
    return layer.kv_elems_per_token * KV_BYTES


def state_bytes_per_request(layer: Layer) -> int:
    return layer.conv_state_elems * CONV_BYTES + layer.ssm_state_elems * SSM_BYTES


def pool_text(index: int | None) -> str:
    return "—" if index is None else str(index)


def cache_lines(layer: Layer) -> list[str]:
    lines = []
    kv, state = kv_bytes_per_token(layer), state_bytes_per_request(layer)
    if layer.kv_shared_from is not None:
        lines.append(f"KV cache: none of its own, reads layer {layer.kv_shared_from}'s")
    if layer.is_kv:
        lines.append(f"KV cache: {format_bytes(kv, short=True)} per token (bf16)" if kv else "KV cache: size not known from the config")
    if layer.is_state:
        lines.append(f"State: {format_bytes(state, short=True)} per request (bf16 conv + fp32 SSM)" if state
                     else "State: size not known from the config")
    return lines


def describe(layer: Layer) -> str:
    """One line: 'mamba2 + none'."""
    return f"{MIXER_NAMES.get(layer.mixer, layer.mixer)} · {FFN_NAMES.get(layer.ffn, layer.ffn)}"


def tooltip_text(layer: Layer, *, mtp: bool = False, repeats: list[int] | None = None) -> str:
    title = f"MTP block {layer.index}" if mtp else f"Layer {layer.index}"
    lines = [
        title,
        f"mixer: {layer.mixer}    ffn: {layer.ffn}",
        f"KV pool index: {pool_text(layer.kv_pool_index)}    state pool index: {pool_text(layer.state_pool_index)}",
        f"params: {human_count(layer.params)}"
        + (f" ({human_count(layer.active_params)} active)" if layer.active_params and layer.active_params != layer.params else ""),
        *cache_lines(layer),
    ]
    if layer.pp_stage:
        lines.insert(2, f"PP stage {layer.pp_stage}")
    if repeats and len(repeats) > 1:
        lines.append(f"folded: also layers {compact_ranges(repeats)}")
    return "\n".join(lines)


def detail_rows(layer: Layer) -> list[tuple[str, str]]:
    """(name, value) pairs for the details panel, the layer's own config facts last."""
    rows = [
        ("mixer", MIXER_NAMES.get(layer.mixer, layer.mixer)),
        ("ffn", FFN_NAMES.get(layer.ffn, layer.ffn)),
        ("KV pool index", pool_text(layer.kv_pool_index)),
        ("state pool index", pool_text(layer.state_pool_index)),
        ("PP stage", str(layer.pp_stage)),
        ("params", human_count(layer.params)),
    ]
    if layer.active_params and layer.active_params != layer.params:
        rows.append(("active params", human_count(layer.active_params)))
    if layer.kv_shared_from is not None:
        rows.append(("KV cache", f"reuses layer {layer.kv_shared_from}'s (none of its own)"))
    if layer.is_kv:
        rows.append(("KV bytes / token (bf16)", format_bytes(kv_bytes_per_token(layer), short=True)))
    if layer.is_state:
        rows.append(("state bytes / request", format_bytes(state_bytes_per_request(layer), short=True)))
        rows.append(("  conv (bf16)", format_bytes(layer.conv_state_elems * CONV_BYTES, short=True)))
        rows.append(("  SSM (fp32)", format_bytes(layer.ssm_state_elems * SSM_BYTES, short=True)))
    for key, value in layer.facts().items():
        rows.append((str(key), format_value(value)))
    return rows


def format_value(value) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(format_value(v) for v in value)
    return str(value)


def compact_ranges(indices: list[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> '0–2, 5, 7–8'."""
    parts: list[str] = []
    items = sorted(indices)
    i = 0
    while i < len(items):
        j = i
        while j + 1 < len(items) and items[j + 1] == items[j] + 1:
            j += 1
        parts.append(str(items[i]) if i == j else f"{items[i]}–{items[j]}")
        i = j + 1
    return ", ".join(parts)


# The mixer each of SGLang's hybrid families is named after, and how to say a mixer in words.
_FAMILY_MIXER = {"mamba2": {"mamba2", "attention+mamba2"}, "gdn": {"gated_delta_net"},
                 "kimi_linear": {"kimi_delta_attention"}, "linear_attn": {"lightning_attention"}}
_MIXER_WORDS = {"short_conv": "short convolutions", "mamba": "Mamba1 layers", "mamba2": "Mamba2 layers",
                "gated_delta_net": "gated DeltaNet layers", "kimi_delta_attention": "KDA layers",
                "lightning_attention": "lightning attention layers"}


def family_note(layer_map: LayerMap) -> str:
    """Why a model carries a family name its layers do not have, e.g. LFM2's "mamba2": it is
    SGLang's grouping (which state cache it uses), not what the layers are. '' when they agree."""
    family = layer_map.family
    if not family:
        return ""
    state = {layer_map.layers[i].mixer for i in layer_map.state_layers} if layer_map.layers else set()
    if not state or state & _FAMILY_MIXER.get(family, {family}):
        return ""
    what = ", ".join(sorted(_MIXER_WORDS.get(m, m) for m in state))
    return (f"\"{family}\" is SGLang's grouping (the state cache it uses for this model); "
            f"its state layers are {what}")


def family_text(layer_map: LayerMap) -> str:
    """'hybrid: mamba2', or with the note when the name is only SGLang's grouping."""
    if not layer_map.family:
        return "not hybrid"
    note = family_note(layer_map)
    if not note:
        return f"hybrid: {layer_map.family}"
    state = {layer_map.layers[i].mixer for i in layer_map.state_layers}
    what = "/".join(sorted(_MIXER_WORDS.get(m, m).split()[0] if m != "short_conv" else "short conv" for m in state))
    return f"hybrid: {layer_map.family} (SGLang's grouping; state layers are {what})"


def model_summary(layer_map: LayerMap) -> list[tuple[str, str]]:
    """Rows for the details panel when no layer is selected."""
    rows = [
        ("type", f"{layer_map.model_type}" + (f" ({layer_map.architecture})" if layer_map.architecture else "")),
        ("hybrid family", (layer_map.family or "none (no recurrent layers)")
         + (f" ({family_note(layer_map)})" if family_note(layer_map) else "")),
        ("layers", str(layer_map.num_layers)),
        ("full attention", compact_ranges(layer_map.full_attention_layers) or "none"),
    ]
    if layer_map.sliding_attention_layers:
        rows.append(("sliding attention", compact_ranges(layer_map.sliding_attention_layers)))
    if layer_map.sparse_attention_layers:
        rows.append(("sparse attention", compact_ranges(layer_map.sparse_attention_layers)))
    if layer_map.kv_shared_layers:
        rows.append(("KV-sharing layers", compact_ranges(layer_map.kv_shared_layers)))
    rows.append(("state layers", f"{len(layer_map.state_layers)}"))
    if layer_map.moe_layers:
        rows.append(("MoE layers", f"{len(layer_map.moe_layers)}"))
    kv = sum(kv_bytes_per_token(l) for l in layer_map.layers)
    state = sum(state_bytes_per_request(l) for l in layer_map.layers)
    if kv:
        rows.append(("KV / token (bf16)", format_bytes(kv, short=True)))
    if state:
        rows.append(("state / request", format_bytes(state, short=True)))
    rows.append(("params", human_count(layer_map.params_total)))
    if layer_map.params_active:
        rows.append(("active params", human_count(layer_map.params_active)))
    if layer_map.mtp_layers:
        rows.append(("MTP blocks", str(len(layer_map.mtp_layers))))
    if layer_map.pp_size > 1:
        rows.append(("PP stages", str(layer_map.pp_size)))
    if layer_map.provenance:
        rows.append(("read by", read_by(layer_map.provenance)))
        rows += [(f"  {fact}", where) for fact, where in fact_sources(layer_map.provenance)]
    for note in layer_map.notes:
        rows.append(("note", note))
    return rows
