"""The facts about a model that launch rules need, read once from its LayerMap.

Head counts come from the layers' typed geometry (core/layermap/layer_geometry.py, filled by
core/families), with the raw config as a fallback where the generic reader could not learn them,
so a rule never has to know which family spelled a field how.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from bringup.core.layermap.vocabulary import LayerMap


@dataclass(frozen=True)
class ModelFacts:
    name: str
    model_type: str
    architecture: str
    family: str | None  # mamba2 | gdn | kimi_linear | linear_attn | None
    num_layers: int
    full_attention_layers: tuple[int, ...]
    state_layers: tuple[int, ...]
    stage_of: tuple[int, ...]  # pp stage of each layer
    pp_size: int
    attention_heads: int | None
    kv_heads: int | None
    mamba_heads: int | None  # Mamba2 heads, or linear-attention value heads
    mamba_groups: int | None  # Mamba2 n_groups, or linear-attention key heads
    mamba_chunk_size: int | None
    config_ssm_dtype: str | None
    config_dtype: str | None
    mla: bool  # full attention is MLA (Kimi-Linear)
    first_layer_mixer: str
    # The checkpoint's quantized weight schemes on the map's layers, (key, label) each, and its dialect.
    weight_schemes: tuple[tuple[str, str], ...] = ()
    quant_method: str = ""
    quant_algo: str = ""  # modelopt's quant_algo (FP8, NVFP4, MIXED_PRECISION...): engines name methods by it

    @property
    def is_hybrid(self) -> bool:
        return bool(self.state_layers)

    def attention_layers_of_stage(self, stage: int) -> list[int]:
        return [i for i in self.full_attention_layers if self.stage_of[i] == stage]

    def state_layers_of_stage(self, stage: int) -> list[int]:
        return [i for i in self.state_layers if self.stage_of[i] == stage]


def _first(values):
    """The first stated size among the layers' (None where a layer does not have it)."""
    return next((v for v in values if isinstance(v, int) and not isinstance(v, bool)), None)


def _recurrent_heads(layer) -> tuple[int | None, int | None]:
    """(heads, groups) of a state layer as the TP rules see them: Mamba2 heads and groups, a linear
    attention's value and key heads (KDA: its heads, no groups)."""
    if layer.mamba2 is not None:
        return layer.mamba2.heads, layer.mamba2.groups
    if layer.gated_delta_net is not None:
        return layer.gated_delta_net.value_heads, layer.gated_delta_net.key_heads
    if layer.kda is not None:
        return layer.kda.heads, None
    return None, None


def _cfg_int(cfg: dict, *keys):
    for key in keys:
        value = cfg.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def facts_of(lm: LayerMap) -> ModelFacts:
    cfg = lm.config or {}
    attn = [l for l in lm.layers if l.is_kv]
    state = [l for l in lm.layers if l.is_state]
    recurrent = [_recurrent_heads(l) for l in state]
    mamba_heads = _first(h for h, _ in recurrent)
    mamba_groups = _first(g for _, g in recurrent)
    chunk = _cfg_int(cfg, "mamba_chunk_size", "chunk_size")
    if chunk is None and lm.family == "mamba2" and lm.model_type == "nemotron_h":
        chunk = 256  # SGLang's NemotronH default (notes §1.2)
    dtype = cfg.get("torch_dtype") or cfg.get("dtype")
    ssm = cfg.get("mamba_ssm_dtype")
    return ModelFacts(
        name=lm.name, model_type=lm.model_type, architecture=lm.architecture, family=lm.family,
        num_layers=lm.num_layers, full_attention_layers=tuple(lm.full_attention_layers),
        state_layers=tuple(lm.state_layers), stage_of=tuple(l.pp_stage for l in lm.layers), pp_size=lm.pp_size,
        attention_heads=_first(l.attention.heads for l in attn if l.attention) or _cfg_int(cfg, "num_attention_heads"),
        kv_heads=_first(l.attention.kv_heads for l in attn if l.attention)
        or _cfg_int(cfg, "num_key_value_heads", "num_attention_heads"),
        mamba_heads=mamba_heads if state else None, mamba_groups=mamba_groups if state else None,
        mamba_chunk_size=chunk if state else None,
        config_ssm_dtype=ssm if isinstance(ssm, str) else None,
        config_dtype=dtype if isinstance(dtype, str) else None,
        mla=lm.family == "kimi_linear" or bool(_cfg_int(cfg, "kv_lora_rank")),
        first_layer_mixer=lm.layers[0].mixer if lm.layers else "none",
        **_weight_schemes(lm),
    )


def _weight_schemes(lm: LayerMap) -> dict:
    seen: dict[str, str] = {}
    for layer in lm.layers:
        if layer.weights is not None:
            for scheme in (layer.weights.mixer, layer.weights.ffn):
                if scheme is not None and scheme.quantized:
                    seen.setdefault(scheme.key, scheme.label)
    method = next((s.method for l in lm.layers if l.weights is not None
                   for s in (l.weights.mixer, l.weights.ffn) if s is not None and s.quantized), "")
    return {"weight_schemes": tuple(seen.items()), "quant_method": method, "quant_algo": _quant_algo(lm.config or {})}


def _quant_algo(config: dict) -> str:
    from bringup.core.layermap.quantization import quantization_config

    raw = quantization_config(config) or {}
    nested = raw.get("quantization")  # hf_quant_config.json's shape
    algo = (nested if isinstance(nested, dict) else raw).get("quant_algo")
    return str(algo).upper() if algo else ""


def facts_for_pp(lm: LayerMap, pp: int) -> ModelFacts:
    """The model's facts with its layers split over `pp` stages (the map's own split when pp matches it)."""
    facts = facts_of(lm)
    if pp == lm.pp_size:
        return facts
    from bringup.core.layermap.pp_split import stage_of_each_layer

    return replace(facts, stage_of=tuple(stage_of_each_layer(lm.num_layers, pp)), pp_size=pp)
