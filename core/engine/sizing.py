"""The layer map the engine sizes its pools from, checked against the model's own cache layout.

The planner works on a `LayerMap` (from `bringup.core.families`). The pools are allocated from the
model's `cache_spec`. Both must agree on which layers hold KV and which hold state, or the plan
would size pools the model does not use; a disagreement is a bug worth a clear error. For a
model_type the layer-map families do not know yet, the map is built from the cache spec itself.
"""

from __future__ import annotations

from math import prod

from bringup.core.errors import UserError
from bringup.core.layermap.vocabulary import Layer, LayerMap


def layer_map_from_spec(config: dict, spec, *, name: str, params: int) -> LayerMap:
    n = int(config.get("num_hidden_layers") or 0)
    n = max([n, *(i + 1 for i in spec.kv_layer_ids), *(i + 1 for i in spec.state_layer_ids)])
    kv, state = list(spec.kv_layer_ids), list(spec.state_layer_ids)
    layers = []
    for i in range(n):
        is_kv, is_state = i in kv, i in state
        mixer = "attention+mamba2" if is_kv and is_state else "attention" if is_kv else "mamba2" if is_state else "none"
        layers.append(Layer(
            index=i, mixer=mixer, ffn="mlp",
            kv_pool_index=kv.index(i) if is_kv else None, state_pool_index=state.index(i) if is_state else None,
            kv_elems_per_token=2 * spec.num_kv_heads * spec.head_dim if is_kv else 0,
            conv_state_elems=prod(spec.conv_shape) if is_state else 0,
            ssm_state_elems=prod(spec.ssm_shape) if is_state else 0,
            attrs={"kv_heads": spec.num_kv_heads, "head_dim": spec.head_dim} if is_kv else {},
        ))
    return LayerMap(name=name, source=name, model_type=str(config.get("model_type") or ""),
                    architecture=(config.get("architectures") or [""])[0], family="mamba2" if state else None,
                    layers=tuple(layers), params_total=params, config=dict(config),
                    notes=("layer map built from the engine model's cache layout",))


def engine_layer_map(config: dict, spec, *, name: str, source: str, params: int, log) -> LayerMap:
    from bringup.core.families import build_layer_map

    try:
        layer_map = build_layer_map(config, name=name, source=source)
    except UserError as err:
        log(f"Planner: no layer-map family for this model ({str(err).split('. ')[0]}); "
            "sizing from the model's own cache layout")
        return layer_map_from_spec(config, spec, name=name, params=params)
    if layer_map.kv_layers != list(spec.kv_layer_ids) or layer_map.state_layers != list(spec.state_layer_ids):
        raise UserError(
            f"the layer map and the engine's model disagree on the caches: layer map KV layers "
            f"{layer_map.kv_layers}, state layers {layer_map.state_layers}; model KV layers "
            f"{list(spec.kv_layer_ids)}, state layers {list(spec.state_layer_ids)}. This is a bug in one of them"
        )
    return layer_map
