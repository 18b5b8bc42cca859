"""Turn a family's per-layer description into a LayerMap: pool indices, PP stages, totals."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from bringup.core.families._blocks import Part
from bringup.core.layermap.vocabulary import KV_MIXERS, STATE_MIXERS, Layer, LayerMap
from bringup.core.layermap.pp_split import stage_of_each_layer


@dataclass
class LayerSpec:
    mixer: str
    ffn: str
    part: Part
    kv_shared_from: int | None = None  # the layer whose KV cache this one reads (Gemma 3n / 4 KV sharing)

    @property
    def owns_kv(self) -> bool:
        return self.mixer in KV_MIXERS and self.kv_shared_from is None


@dataclass
class FamilyResult:
    """What a family module returns."""

    layers: list[LayerSpec]
    hybrid_family: str | None  # SGLang's mambaish split
    outside: Part  # params outside the decoder layers: embeddings, final norm, lm_head, shared blocks
    mtp_layers: list[LayerSpec] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    provenance: dict = field(default_factory=dict)  # set by the transformers path; families get a default


def _layer(index: int, spec: LayerSpec, kv_index, state_index, stage: int) -> Layer:
    p = spec.part
    return Layer(
        index=index,
        mixer=spec.mixer,
        ffn=spec.ffn,
        kv_pool_index=kv_index,
        state_pool_index=state_index,
        pp_stage=stage,
        params=p.params,
        active_params=p.active_params,
        kv_elems_per_token=p.kv_elems if spec.owns_kv else 0,
        conv_state_elems=p.conv_elems if spec.mixer in STATE_MIXERS else 0,
        ssm_state_elems=p.ssm_elems if spec.mixer in STATE_MIXERS else 0,
        kv_shared_from=spec.kv_shared_from,
        **p.geometry(),
    )


def _number(specs: list[LayerSpec], stages: list[int]) -> tuple[Layer, ...]:
    layers, kv, state = [], 0, 0
    for i, spec in enumerate(specs):
        kv_index = state_index = None
        if spec.owns_kv:
            kv_index, kv = kv, kv + 1
        if spec.mixer in STATE_MIXERS:
            state_index, state = state, state + 1
        layers.append(_layer(i, spec, kv_index, state_index, stages[i]))
    return tuple(layers)


def _with_weight_schemes(layers: tuple[Layer, ...], config: dict, notes: list[str]) -> tuple[Layer, ...]:
    """Each layer with the scheme its checkpoint stores it in, where the checkpoint is quantized; a
    quantization table the workbench cannot read is a note, the map is still drawn."""
    from bringup.core.errors import UserError
    from bringup.core.layermap.layer_schemes import schemes_of_layer
    from bringup.core.layermap.quantization import read_quantization

    try:
        quant = read_quantization(config)
    except UserError as err:
        notes.append(str(err))
        return layers
    if quant is None:
        return layers
    model_type = config.get("model_type") if isinstance(config.get("model_type"), str) else ""
    return tuple(replace(l, weights=schemes_of_layer(model_type, l, quant)) for l in layers)


def assemble(result: FamilyResult, config: dict, *, name: str, source: str, pp: int, reader: str = "") -> LayerMap:
    specs = result.layers
    layers = _number(specs, stage_of_each_layer(len(specs), pp))
    notes = list(result.notes)
    layers = _with_weight_schemes(layers, config, notes)
    # MTP blocks live outside the decoder stack: their own numbering, on the last stage.
    mtp = _number(result.mtp_layers, [pp - 1] * len(result.mtp_layers))
    total = result.outside.params + sum(l.params for l in layers)
    has_moe = any(l.ffn == "moe" for l in layers)
    active = result.outside.active_params + sum(l.active_params for l in layers) if has_moe else None
    archs = config.get("architectures")
    architecture = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else ""
    model_type = config.get("model_type")
    return LayerMap(
        name=name,
        source=source,
        model_type=model_type if isinstance(model_type, str) else "",
        architecture=architecture,
        family=result.hybrid_family,
        layers=layers,
        params_total=total,
        params_active=active,
        mtp_layers=mtp,
        pp_size=pp,
        config=config,
        notes=tuple(notes),
        provenance=result.provenance or {"path": "family", "reader": reader},
    )
