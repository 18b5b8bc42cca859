"""The layer map: what each decoder layer of a model is, and where its caches live.

This module holds the types and the derived views; `core/families/` builds a LayerMap from a config
for each architecture. Vocabulary (DESIGN.md): a layer has a *mixer* and an *ffn*; KV layers keep a
KV cache, state layers keep a fixed-size recurrent state per request; a pool stores only its own
layers, so a layer's position inside a pool (its pool index) differs from its global index.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bringup.core.layermap.quantization import LayerSchemes
from bringup.core.layermap.layer_geometry import (
    GEOMETRY_FIELDS,
    AttentionGeometry,
    GatedDeltaNetGeometry,
    KimiDeltaGeometry,
    LightningGeometry,
    Mamba2Geometry,
    MambaGeometry,
    MLPGeometry,
    MoEGeometry,
    ShortConvGeometry,
)

MIXERS = (
    "attention",  # full softmax attention, MLA included
    "sliding_attention",
    "sparse_attention",  # full-context KV, an indexer picks the keys each query reads (DeepSeek-V3.2 DSA)
    "mamba2",
    "mamba",  # Mamba1 (Jamba)
    "gated_delta_net",  # Qwen3-Next, Qwen3.5
    "kimi_delta_attention",
    "lightning_attention",  # MiniMax
    "short_conv",  # LFM2
    "attention+mamba2",  # Falcon-H1: both in parallel
    "none",  # a NemotronH block that is only an FFN
)
FFNS = ("mlp", "moe", "none")
KV_MIXERS = frozenset({"attention", "sliding_attention", "sparse_attention", "attention+mamba2"})
# Mixers whose KV cache grows with the whole context (the "full attention layers" of SGLang's pools).
FULL_KV_MIXERS = frozenset({"attention", "sparse_attention", "attention+mamba2"})
STATE_MIXERS = frozenset(
    {"mamba2", "mamba", "gated_delta_net", "kimi_delta_attention", "lightning_attention", "short_conv", "attention+mamba2"}
)
HYBRID_FAMILIES = ("mamba2", "gdn", "kimi_linear", "linear_attn")


@dataclass(frozen=True)
class Layer:
    """One decoder layer (for NemotronH: one block, which is a mixer or an FFN)."""

    index: int
    mixer: str
    ffn: str
    kv_pool_index: int | None = None
    state_pool_index: int | None = None
    pp_stage: int = 0
    params: int = 0  # parameters of this layer (all experts counted)
    active_params: int = 0  # parameters touched per token (top-k experts only)
    # Cache geometry at TP 1, in elements, so the planner can apply any dtype and TP split.
    kv_elems_per_token: int = 0  # K and V of this layer for one token
    conv_state_elems: int = 0  # per request
    ssm_state_elems: int = 0  # per request (SSM / linear-attention state)
    # KV sharing (Gemma 3n / 4): the layer whose KV cache this attention layer reads; it keeps none itself.
    kv_shared_from: int | None = None
    # The sizes of the layer's parts (core/layermap/layer_geometry.py), those it has: what the engine
    # builds its tensors from and the planner splits over TP. Falcon-H1 and Zamba2 hybrids carry both
    # attention and mamba2; a Granite MoE layer's shared MLP is its moe's shared_intermediate.
    attention: AttentionGeometry | None = None
    mamba2: Mamba2Geometry | None = None
    mamba: MambaGeometry | None = None
    gated_delta_net: GatedDeltaNetGeometry | None = None
    kda: KimiDeltaGeometry | None = None
    lightning: LightningGeometry | None = None
    short_conv: ShortConvGeometry | None = None
    mlp: MLPGeometry | None = None
    moe: MoEGeometry | None = None
    # How the checkpoint stores this layer's weights (quantization.py): set when it is quantized.
    weights: LayerSchemes | None = None

    @property
    def is_kv(self) -> bool:
        """The layer keeps a KV cache of its own (a KV-sharing layer reads another layer's)."""
        return self.mixer in KV_MIXERS and self.kv_shared_from is None

    @property
    def is_state(self) -> bool:
        return self.mixer in STATE_MIXERS

    def facts(self) -> dict:
        """The layer's sizes as name -> value pairs for people (the details panel, the layer list's search)."""
        doc: dict = {}
        for name in GEOMETRY_FIELDS:
            part = getattr(self, name)
            if part is not None:
                doc.update(part.facts())
        return doc

    def to_json(self) -> dict:
        doc = {
            "index": self.index,
            "mixer": self.mixer,
            "ffn": self.ffn,
            "kv_pool_index": self.kv_pool_index,
            "state_pool_index": self.state_pool_index,
            "pp_stage": self.pp_stage,
        }
        if self.kv_shared_from is not None:  # only KV-sharing layers carry it: other documents keep their shape
            doc["kv_shared_from"] = self.kv_shared_from
        if self.weights is not None:  # only quantized checkpoints' layers carry it
            doc["weights"] = self.weights.to_json()
        return doc


@dataclass(frozen=True)
class Fold:
    """A run of a repeating unit: `unit` (a tuple of (mixer, ffn)) repeated `times` from `start`."""

    start: int
    unit: tuple[tuple[str, str], ...]
    times: int

    @property
    def stop(self) -> int:
        return self.start + len(self.unit) * self.times


@dataclass
class LayerMap:
    name: str  # what to call the model (hub id, folder name, catalogue name)
    source: str  # what the user gave
    model_type: str
    architecture: str  # architectures[0], or "" when the config has none
    family: str | None  # SGLang's mambaish split: one of HYBRID_FAMILIES, or None
    layers: tuple[Layer, ...]
    params_total: int
    params_active: int | None = None  # set for MoE models
    mtp_layers: tuple[Layer, ...] = ()  # multi-token-prediction blocks, outside the decoder stack
    pp_size: int = 1
    config: dict = field(default_factory=dict, repr=False)  # the effective (text) config
    notes: tuple[str, ...] = ()  # things the loader noticed, e.g. a corrected num_hidden_layers
    # Which reader produced the facts: {"path": "family" | "transformers" | "layer_types", "reader": ...,
    # and, on the transformers path, one entry per fact saying where it was read}.
    provenance: dict = field(default_factory=dict)

    # Derived lists, in global layer ids.
    @property
    def num_layers(self) -> int:
        return len(self.layers)

    @property
    def full_attention_layers(self) -> list[int]:
        return [l.index for l in self.layers if l.mixer in FULL_KV_MIXERS]

    @property
    def sliding_attention_layers(self) -> list[int]:
        return [l.index for l in self.layers if l.mixer == "sliding_attention"]

    @property
    def kv_layers(self) -> list[int]:
        return [l.index for l in self.layers if l.is_kv]

    @property
    def sparse_attention_layers(self) -> list[int]:
        return [l.index for l in self.layers if l.mixer == "sparse_attention"]

    @property
    def kv_shared_layers(self) -> list[int]:
        """Attention layers that read an earlier layer's KV cache and keep none of their own."""
        return [l.index for l in self.layers if l.kv_shared_from is not None]

    @property
    def state_layers(self) -> list[int]:
        return [l.index for l in self.layers if l.is_state]

    @property
    def moe_layers(self) -> list[int]:
        return [l.index for l in self.layers if l.ffn == "moe"]

    @property
    def mlp_layers(self) -> list[int]:
        return [l.index for l in self.layers if l.ffn == "mlp"]

    def layers_of_stage(self, stage: int) -> list[Layer]:
        return [l for l in self.layers if l.pp_stage == stage]

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "source": self.source,
            "model_type": self.model_type,
            "architecture": self.architecture,
            "family": self.family,
            "num_layers": self.num_layers,
            "pp_size": self.pp_size,
            "layers": [l.to_json() for l in self.layers],
            "full_attention_layers": self.full_attention_layers,
            "sliding_attention_layers": self.sliding_attention_layers,
            "state_layers": self.state_layers,
            "moe_layers": self.moe_layers,
            "mlp_layers": self.mlp_layers,
            "mtp_layers": [l.to_json() for l in self.mtp_layers],
            "params": {"total": self.params_total, "active": self.params_active},
            "sparse_attention_layers": self.sparse_attention_layers,
            "kv_shared_layers": self.kv_shared_layers,
            "notes": list(self.notes),
            "provenance": self.provenance,
        }
