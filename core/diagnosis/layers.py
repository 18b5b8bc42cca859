"""Layer-index findings against a model: what the requested layer is, and what the valid ones are."""

from __future__ import annotations

from bringup.core.layermap.vocabulary import LayerMap

from bringup.core.finding import LayerInfo


def _describe(mixer: str, ffn: str) -> str:
    if mixer == "none":
        return f"an FFN-only ({ffn}) block"
    article = "an" if mixer[:1] in "aeiou" else "a"
    return f"{article} {mixer} layer" + (f" (ffn {ffn})" if ffn != "none" else "")


def _kinds(infos: list[LayerInfo]) -> str:
    mixers = sorted({i.mixer for i in infos})
    return " / ".join(mixers) if mixers else "no"


def layer_context(layer_map: LayerMap, requested: int, valid: list[int], pool: str) -> tuple[LayerInfo | None, list[LayerInfo], str]:
    """(the requested layer, the valid layers, a sentence saying what they are in this model)."""
    by_index = {l.index: l for l in layer_map.layers}
    name = layer_map.name or "the model"
    valid_infos = [LayerInfo(i, by_index[i].mixer, by_index[i].ffn) for i in valid if i in by_index]
    layer = by_index.get(requested)
    if layer is None:
        return None, valid_infos, (f" {name} has only {layer_map.num_layers} layers (0-{layer_map.num_layers - 1}), "
                                   f"so layer {requested} does not exist in it: the log may be from another model.")
    requested_info = LayerInfo(layer.index, layer.mixer, layer.ffn)
    sentence = (f" In {name}, layer {requested} is {_describe(layer.mixer, layer.ffn)}; the {len(valid)} layers the "
                f"pool holds are {_kinds(valid_infos)} layers.")
    expected = layer_map.full_attention_layers if pool == "kv" else layer_map.state_layers
    if pool in ("kv", "state") and sorted(valid) != sorted(expected):
        sentence += (f" Note: {name}'s {'full-attention' if pool == 'kv' else 'state'} layers are {expected}, not the "
                     "log's list; the log may be from another model or another pipeline stage.")
    return requested_info, valid_infos, sentence
