"""Shared arithmetic: page rounding, per-stage weights, the context length a config declares."""

from __future__ import annotations

from bringup.core.layermap.vocabulary import LayerMap

_CONTEXT_KEYS = ("max_position_embeddings", "max_sequence_length", "seq_length", "n_positions", "model_max_length")


def page_floor(tokens: int, page_size: int) -> int:
    return max(0, tokens) // page_size * page_size


def page_ceil(tokens: int, page_size: int) -> int:
    return -(-tokens // page_size) * page_size


def config_context(layer_map: LayerMap) -> int | None:
    """The context length the config declares (SGLang's context_len when --context-length is unset)."""
    configs = [layer_map.config, layer_map.config.get("text_config") or {}]
    for cfg in configs:
        for key in _CONTEXT_KEYS:
            value = cfg.get(key)
            if isinstance(value, int) and value > 0:
                return value
    return None


def stage_weight_shares(layer_map: LayerMap, stages: list[list]) -> list[float]:
    """Fraction of the model's weights on each PP stage.

    Each stage holds its layers' parameters; the rest (embeddings, final norm, LM head) sits on the
    first and last stages, split evenly between them. Without per-layer counts, stages are even.
    """
    pp = len(stages)
    if pp == 1:
        return [1.0]
    layer_params = [sum(l.params for l in stage) for stage in stages]
    total_layers = sum(layer_params)
    total = max(layer_map.params_total, total_layers)
    if total_layers == 0 or total == 0:
        return [1.0 / pp] * pp
    rest = total - total_layers
    shares = [p / total for p in layer_params]
    shares[0] += rest / 2 / total
    shares[-1] += rest / 2 / total
    return shares


def stage_of_layers(layer_map: LayerMap, pp: int) -> list[list]:
    """Layers per PP stage: the map's own split when it was built for `pp`, else SGLang's split."""
    if layer_map.pp_size == pp:
        return [layer_map.layers_of_stage(s) for s in range(pp)]
    from bringup.core.layermap.pp_split import pp_layer_ranges

    return [list(layer_map.layers[a:b]) for a, b in pp_layer_ranges(layer_map.num_layers, pp)]
