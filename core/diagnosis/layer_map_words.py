"""A named layer said in the map's words: its mixer and FFN, its pool index, its PP stage, and
what is odd about it (past the decoder stack and so an MTP block, a module the layer does not have,
a stage other than the rank's)."""

from __future__ import annotations

from dataclasses import dataclass

from bringup.core.layermap.vocabulary import LayerMap

from .layer_refs import LayerRef

# Module names in paths, and the mixers that have them.
_MODULE_MIXERS = (
    ("linear_attn", {"gated_delta_net", "kimi_delta_attention", "lightning_attention"}),
    ("self_attn", {"attention", "sliding_attention", "sparse_attention", "attention+mamba2"}),
    ("attn_", {"attention", "sliding_attention", "sparse_attention", "attention+mamba2"}),
    ("mixer", None),  # NemotronH/Mamba name every mixer "mixer"
    ("ssm_", {"mamba2", "mamba", "gated_delta_net", "attention+mamba2"}),
    ("mamba", {"mamba2", "mamba", "attention+mamba2"}),
    ("conv", {"short_conv", "mamba2", "mamba", "gated_delta_net", "kimi_delta_attention"}),
)


@dataclass(frozen=True)
class LayerWords:
    layer: int
    mixer: str | None  # None: past the decoder stack
    ffn: str | None
    kv_pool_index: int | None
    state_pool_index: int | None
    pp_stage: int | None
    sentence: str  # what it is and what is wrong about it
    schemes: tuple[str, ...]  # how the log named it
    mtp: bool = False

    def to_json(self) -> dict:
        return {"layer": self.layer, "mixer": self.mixer, "ffn": self.ffn, "kv_pool_index": self.kv_pool_index,
                "state_pool_index": self.state_pool_index, "pp_stage": self.pp_stage, "sentence": self.sentence,
                "named_as": list(self.schemes), "mtp": self.mtp}


def _pp_stages(num_layers: int, pp: int) -> list[int]:
    """Each layer's PP stage under an even split (vLLM and SGLang give the remainder to the last stages)."""
    if pp <= 1:
        return [0] * num_layers
    base, extra = divmod(num_layers, pp)
    sizes = [base + (1 if s >= pp - extra else 0) for s in range(pp)]
    out: list[int] = []
    for stage, size in enumerate(sizes):
        out += [stage] * size
    return out


def _module_note(module: str, mixer: str) -> str:
    for name, mixers in _MODULE_MIXERS:
        if module.startswith(name) or f".{name}" in f".{module}":
            if mixers is not None and mixer not in mixers:
                return f" The log names its {module.split('.')[0]}, which a {mixer} layer does not have."
            return ""
    return ""


def describe_refs(refs: list[LayerRef], layer_map: LayerMap, pp: int = 1) -> list[LayerWords]:
    """One LayerWords per distinct layer id named, in order of first mention."""
    by_index = {l.index: l for l in layer_map.layers}
    n = layer_map.num_layers
    stages = _pp_stages(n, pp) if pp > 1 else None
    grouped: dict[int, list[LayerRef]] = {}
    for r in refs:
        if r.layer is not None:
            grouped.setdefault(r.layer, []).append(r)
    out: list[LayerWords] = []
    name = layer_map.name or "the model"
    for index, rs in grouped.items():
        schemes = tuple(dict.fromkeys(r.scheme for r in rs))
        module = next((r.module for r in rs if r.module), "")
        layer = by_index.get(index)
        if layer is None:
            past = index - n
            mtp = layer_map.mtp_layers
            if 0 <= past < len(mtp):
                sentence = (f"layer {index} is past {name}'s {n} decoder layers: it is MTP block {past} "
                            f"({mtp[past].mixer}, ffn {mtp[past].ffn}), which only a draft/speculative worker holds.")
                out.append(LayerWords(index, mtp[past].mixer, mtp[past].ffn, None, None, None, sentence, schemes, True))
                continue
            if past == 0 or any(r.mtp for r in rs):
                sentence = (f"layer {index} is past {name}'s {n} decoder layers (0-{n - 1}): the first block after them "
                            "is where MTP/next-token heads sit; the model's map holds none, so the checkpoint or the "
                            "engine expects a draft block this config does not declare.")
            else:
                sentence = (f"layer {index} does not exist in {name} ({n} layers, 0-{n - 1}): the log may be from another "
                            "model, or an index from another numbering (a pool's, a PP stage's).")
            out.append(LayerWords(index, None, None, None, None, None, sentence, schemes, past == 0))
            continue
        what = f"a {layer.mixer} layer" if layer.mixer != "none" else "an FFN-only block"
        ffn = f", ffn {layer.ffn}" if layer.ffn != "none" else ""
        pools = []
        if layer.kv_pool_index is not None:
            pools.append(f"KV pool index {layer.kv_pool_index}")
        if layer.state_pool_index is not None:
            pools.append(f"state pool index {layer.state_pool_index}")
        if not pools:
            pools.append("in neither pool")
        stage = stages[index] if stages else (layer.pp_stage if layer_map.pp_size > 1 else None)
        sentence = f"layer {index} is {what}{ffn}; {', '.join(pools)}"
        if stage is not None:
            sentence += f"; on PP stage {stage} of {pp if stages else layer_map.pp_size}"
        sentence += "."
        if "pool_index" in schemes and layer.kv_pool_index is None:
            sentence += f" It was asked of the KV pool, which holds only {name}'s attention layers {layer_map.kv_layers}."
        sentence += _module_note(module, layer.mixer) if module else ""
        if stage not in (None, 0) and any(r.scheme == "module_path" for r in rs):
            sentence += (" Layer names in KV cache groups are global: a rank that holds other layers fails to look "
                         "this one up.")
        out.append(LayerWords(index, layer.mixer, layer.ffn, layer.kv_pool_index, layer.state_pool_index, stage,
                              sentence, schemes))
    return out
