"""The sizes of a layer's parts, typed: what the families read from a config, once.

A family module (core/families/) fills these from config.json; the engine's models
(core/engine/models/) build their tensors from them and the planner splits caches over TP with
them, so the map and the engine cannot disagree about a model's size. Behaviour (activations,
norm epsilon, RoPE) stays in the config, read by the engine model that needs it.

Every size is at TP 1. A field that the generic (transformers) reader cannot learn is None.
`facts()` gives each geometry as the flat name -> value pairs the details panel shows.

`problems()` states, beside each geometry, what the engine's modules assume of its sizes (KV heads
divide the query heads, Mamba2 groups divide its heads, top-k within the experts, positive sizes, a
chunk of at least one token). `core/layermap/constraints.py` collects them over a map: `inspect` and
`validate` report them as findings and the engine refuses to build a model that has any. `keys`
names the config field each size was read from (the family knows its spelling), so a message says
which field to fix.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields


@dataclass(frozen=True)
class SizeProblem:
    """A size the engine cannot build with: the config field to fix and what is wrong with it."""

    field: str
    message: str


def _keys():
    return field(default_factory=dict, compare=False, hash=False, repr=False)


def _name(geometry, size: str) -> str:
    """The config field a size came from, where the family said, else the size's own name."""
    return geometry.keys.get(size, size)


def _positive(geometry, *sizes: str) -> list[SizeProblem]:
    out = []
    for size in sizes:
        value = getattr(geometry, size)
        if isinstance(value, int) and value < 1:
            out.append(SizeProblem(_name(geometry, size), f"{_name(geometry, size)} is {value}; it must be at least 1"))
    return out


def _divides(geometry, part: str, whole: str, why: str) -> list[SizeProblem]:
    """`part` must divide `whole` (both known and positive), else a problem naming `part`'s field."""
    p, w = getattr(geometry, part), getattr(geometry, whole)
    if not (isinstance(p, int) and isinstance(w, int)) or p < 1 or w < 1 or w % p == 0:
        return []
    return [SizeProblem(_name(geometry, part),
                        f"{_name(geometry, part)} ({p}) does not divide {_name(geometry, whole)} ({w}): {why}")]


def _facts(obj, names: dict[str, str]) -> dict:
    """The set fields of `obj` under their display names (None and False left out)."""
    out = {}
    for f in fields(obj):
        value = getattr(obj, f.name)
        if f.name in names and value is not None and value is not False:
            out[names[f.name]] = value
    return out


@dataclass(frozen=True)
class LatentKV:
    """MLA (DeepSeek-V2 style): the KV cache keeps the compressed latent and one shared rope key."""

    kv_lora_rank: int
    qk_rope_head_dim: int
    q_lora_rank: int = 0  # 0: the query is projected directly, no low-rank step


@dataclass(frozen=True)
class AttentionGeometry:
    heads: int | None
    kv_heads: int | None  # None for MLA: the cache holds one latent vector, not heads
    head_dim: int | None  # query/key width per head (MLA: no-rope + rope part)
    v_head_dim: int | None = None  # V's width per head where it differs from K's
    window: int | None = None  # sliding layers: tokens attended
    sinks: bool = False  # a learnt sink logit per head (gpt-oss)
    k_eq_v: bool = False  # V is read from the K projection (Gemma 4 full layers)
    in_dim: int | None = None  # input width where it is not hidden_size (Zamba2's shared block reads [h, emb])
    shared_block: bool = False  # the weights belong to a block several layers share (Zamba2)
    latent: LatentKV | None = None  # MLA
    indexer_head_dim: int | None = None  # sparse attention (DSA): the indexer's cached key per token
    index_topk: int | None = None  # sparse attention: keys each query reads

    keys: dict = _keys()  # size name -> the config field it was read from
    @property
    def q_width(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_width(self) -> int:
        return self.kv_heads * self.head_dim

    def problems(self) -> list[SizeProblem]:
        if self.latent is not None:
            return _positive(self, "heads", "head_dim")
        return _positive(self, "heads", "kv_heads", "head_dim") + _divides(
            self, "kv_heads", "heads", "each KV head serves the same number of query heads (grouped-query attention)")

    def facts(self) -> dict:
        doc = _facts(self, {"heads": "heads", "kv_heads": "kv_heads", "head_dim": "head_dim", "window": "window",
                            "sinks": "sinks", "k_eq_v": "k_eq_v", "shared_block": "shared_block",
                            "v_head_dim": "v_head_dim", "indexer_head_dim": "indexer_head_dim",
                            "index_topk": "index_topk"})
        if self.latent is not None:
            doc.update(mla=True, kv_lora_rank=self.latent.kv_lora_rank, qk_rope_head_dim=self.latent.qk_rope_head_dim)
            if self.latent.q_lora_rank:
                doc["q_lora_rank"] = self.latent.q_lora_rank
        return doc


@dataclass(frozen=True)
class Mamba2Geometry:
    heads: int
    head_dim: int
    groups: int
    d_state: int
    conv_kernel: int
    chunk_size: int | None = None  # the chunked scan's block, as the config states it (None: not known)

    keys: dict = _keys()  # size name -> the config field it was read from
    @property
    def intermediate(self) -> int:
        return self.heads * self.head_dim

    @property
    def conv_dim(self) -> int:
        """Channels of the causal conv: x, B and C."""
        return self.intermediate + 2 * self.groups * self.d_state

    def problems(self) -> list[SizeProblem]:
        out = _positive(self, "heads", "head_dim", "groups", "d_state", "conv_kernel", "chunk_size")
        return out + _divides(self, "groups", "heads", "B and C are shared by the same number of heads in each group")

    def facts(self) -> dict:
        return _facts(self, {"heads": "mamba_heads", "head_dim": "mamba_head_dim", "groups": "mamba_groups",
                             "d_state": "d_state", "conv_kernel": "conv_kernel", "chunk_size": "chunk_size"})


@dataclass(frozen=True)
class MambaGeometry:
    """Mamba (v1), as Jamba builds it: a full [inner, d_state] A."""

    inner: int | None
    d_state: int | None
    conv_kernel: int | None
    dt_rank: int | None

    keys: dict = _keys()  # size name -> the config field it was read from
    def problems(self) -> list[SizeProblem]:
        return _positive(self, "inner", "d_state", "conv_kernel", "dt_rank")

    def facts(self) -> dict:
        return _facts(self, {"inner": "mamba_inner", "d_state": "d_state", "conv_kernel": "conv_kernel",
                             "dt_rank": "dt_rank"})


@dataclass(frozen=True)
class GatedDeltaNetGeometry:
    key_heads: int
    value_heads: int
    key_head_dim: int
    value_head_dim: int
    conv_kernel: int

    keys: dict = _keys()  # size name -> the config field it was read from
    @property
    def key_dim(self) -> int:
        return self.key_heads * self.key_head_dim

    @property
    def value_dim(self) -> int:
        return self.value_heads * self.value_head_dim

    @property
    def conv_dim(self) -> int:
        return 2 * self.key_dim + self.value_dim

    def problems(self) -> list[SizeProblem]:
        out = _positive(self, "key_heads", "value_heads", "key_head_dim", "value_head_dim", "conv_kernel")
        return out + _divides(self, "key_heads", "value_heads", "each key head serves the same number of value heads")

    def facts(self) -> dict:
        return _facts(self, {"key_heads": "linear_key_heads", "value_heads": "linear_value_heads",
                             "key_head_dim": "linear_key_head_dim", "value_head_dim": "linear_value_head_dim",
                             "conv_kernel": "conv_kernel"})


@dataclass(frozen=True)
class KimiDeltaGeometry:
    """Kimi Delta Attention: one head width for keys and values, a conv over q, k and v."""

    heads: int
    head_dim: int
    conv_kernel: int

    keys: dict = _keys()  # size name -> the config field it was read from
    @property
    def width(self) -> int:
        return self.heads * self.head_dim

    def problems(self) -> list[SizeProblem]:
        return _positive(self, "heads", "head_dim", "conv_kernel")

    def facts(self) -> dict:
        return _facts(self, {"heads": "linear_heads", "head_dim": "linear_head_dim", "conv_kernel": "conv_kernel"})


@dataclass(frozen=True)
class LightningGeometry:
    """MiniMax's lightning attention: a [head_dim, head_dim] state per head, no conv."""

    heads: int
    head_dim: int

    keys: dict = _keys()  # size name -> the config field it was read from
    def problems(self) -> list[SizeProblem]:
        return _positive(self, "heads", "head_dim")

    def facts(self) -> dict:
        return _facts(self, {"heads": "heads", "head_dim": "head_dim"})


@dataclass(frozen=True)
class ShortConvGeometry:
    """LFM2's gated short convolution: a conv window over `channels`, no recurrent state."""

    channels: int
    conv_kernel: int

    keys: dict = _keys()  # size name -> the config field it was read from
    def problems(self) -> list[SizeProblem]:
        return _positive(self, "channels", "conv_kernel")

    def facts(self) -> dict:
        return _facts(self, {"channels": "conv_channels", "conv_kernel": "conv_kernel"})


@dataclass(frozen=True)
class MLPGeometry:
    intermediate: int

    keys: dict = _keys()  # size name -> the config field it was read from
    def problems(self) -> list[SizeProblem]:
        return _positive(self, "intermediate")

    def facts(self) -> dict:
        return {"intermediate_size": self.intermediate}


@dataclass(frozen=True)
class MoEGeometry:
    experts: int
    top_k: int | None
    expert_intermediate: int | None = None  # one routed expert's width
    shared_intermediate: int = 0  # the always-active shared expert(s), all together; 0: none
    latent: int = 0  # routed experts run in a smaller latent width (Nemotron-3 Super's moe_latent_size); 0: hidden
    dense_mlp_alongside: bool = False  # a dense MLP runs beside the experts in the same layer (Gemma 4)
    groups: int = 1  # grouped routing (DeepSeek-style): experts in this many groups...
    topk_groups: int = 1  # ...of which the best this many are searched for the top-k

    keys: dict = _keys()  # size name -> the config field it was read from
    def problems(self) -> list[SizeProblem]:
        out = _positive(self, "experts", "top_k", "expert_intermediate", "groups", "topk_groups")
        out += _divides(self, "groups", "experts", "grouped routing splits the experts into equal groups")
        if self.groups >= 1 and self.topk_groups > self.groups:
            groups, topk = _name(self, "groups"), _name(self, "topk_groups")
            out.append(SizeProblem(topk, f"{topk} ({self.topk_groups}) is more than {groups} ({self.groups}): "
                                         "routing searches that many of the expert groups"))
        if isinstance(self.top_k, int) and self.experts >= 1 and self.top_k > self.experts:
            top_k, experts = _name(self, "top_k"), _name(self, "experts")
            out.append(SizeProblem(top_k, f"{top_k} ({self.top_k}) is more than {experts} ({self.experts}): "
                                          "each token picks that many different experts"))
        return out

    def facts(self) -> dict:
        doc = _facts(self, {"experts": "experts", "top_k": "top_k", "expert_intermediate": "moe_intermediate_size",
                            "shared_intermediate": "shared_intermediate_size", "latent": "moe_latent_size",
                            "dense_mlp_alongside": "dense_mlp_alongside"})
        return {k: v for k, v in doc.items() if v != 0 or k in ("experts", "top_k")}  # 0 = no shared / no latent


# The typed parts a layer (and a family's Part) may carry, by field name.
GEOMETRY_FIELDS = ("attention", "mamba2", "mamba", "gated_delta_net", "kda", "lightning", "short_conv", "mlp", "moe")
