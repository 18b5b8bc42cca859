"""Parameter counts and cache geometry of the building blocks, from config numbers alone.

Counts follow what transformers allocates (`sum(p.numel() for p in model.parameters())`), so a
family module adds up blocks the way the HF modeling file builds them. Cache geometry is in
elements at TP 1, as SGLang sizes its pools (sglang-notes §2.3).

Each Part also carries the typed sizes of what it builds (core/layermap/layer_geometry.py): the
attention, Mamba2, linear-attention, MLP or MoE geometry, which the assembled Layer keeps and the
engine builds its tensors from.
"""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass
class Part:
    """The params of one block, what a token touches, cache geometry and the typed sizes of its parts."""

    params: int = 0
    active: int | None = None  # None = same as params
    kv_elems: int = 0
    conv_elems: int = 0
    ssm_elems: int = 0
    attention: AttentionGeometry | None = None
    mamba2: Mamba2Geometry | None = None
    mamba: MambaGeometry | None = None
    gated_delta_net: GatedDeltaNetGeometry | None = None
    kda: KimiDeltaGeometry | None = None
    lightning: LightningGeometry | None = None
    short_conv: ShortConvGeometry | None = None
    mlp: MLPGeometry | None = None
    moe: MoEGeometry | None = None

    @property
    def active_params(self) -> int:
        return self.params if self.active is None else self.active

    def geometry(self) -> dict:
        """The typed sizes this part carries, by Layer field name."""
        return {name: getattr(self, name) for name in GEOMETRY_FIELDS if getattr(self, name) is not None}

    def __add__(self, other: "Part") -> "Part":
        return Part(
            params=self.params + other.params,
            active=self.active_params + other.active_params,
            kv_elems=self.kv_elems + other.kv_elems,
            conv_elems=self.conv_elems + other.conv_elems,
            ssm_elems=self.ssm_elems + other.ssm_elems,
            **{**self.geometry(), **other.geometry()},
        )


def linear(n_in: int, n_out: int, bias: bool = False) -> int:
    return n_in * n_out + (n_out if bias else 0)


def norm(dim: int) -> Part:
    return Part(params=dim)


def attention(
    hidden: int,
    heads: int,
    kv_heads: int,
    head_dim: int,
    *,
    qkv_bias: bool = False,
    o_bias: bool = False,
    qk_norm: int = 0,  # params of q_norm + k_norm (per-head norms: 2 * head_dim)
    window: int | None = None,
    in_dim: int | None = None,  # Zamba2 feeds attention a wider input
    sinks: bool = False,  # gpt-oss: one learnt sink logit per head
    keys: dict | None = None,  # size name -> config field (ConfigView.keys), for messages
) -> Part:
    d_in = in_dim or hidden
    p = (
        linear(d_in, heads * head_dim, qkv_bias)
        + 2 * linear(d_in, kv_heads * head_dim, qkv_bias)
        + linear(heads * head_dim, hidden, o_bias)
        + qk_norm
        + (heads if sinks else 0)
    )
    geometry = AttentionGeometry(heads=heads, kv_heads=kv_heads, head_dim=head_dim, window=window or None,
                                 sinks=sinks, in_dim=in_dim, keys=keys or {})
    return Part(params=p, kv_elems=2 * kv_heads * head_dim, attention=geometry)


def mlp(hidden: int, inter: int, *, gated: bool = True, bias: bool = False, key: str = "intermediate_size") -> Part:
    n = 3 if gated else 2
    p = n * hidden * inter + ((n - 1) * inter + hidden if bias else 0)
    return Part(params=p, mlp=MLPGeometry(inter, keys={"intermediate": key}))


def moe(
    hidden: int,
    experts: int,
    top_k: int,
    expert_params: int,  # one routed expert
    *,
    router: int,  # router weight (+ bias)
    shared: int = 0,  # shared expert(s), always active
    other: int = 0,  # always-active extras (latent projections, shared-expert gate...)
    expert_intermediate: int | None = None,  # the sizes the engine builds (MoEGeometry)
    shared_intermediate: int = 0,
    latent: int = 0,
    groups: int = 1,
    topk_groups: int = 1,
    keys: dict | None = None,
) -> Part:
    p = experts * expert_params + router + shared + other
    active = min(top_k, experts) * expert_params + router + shared + other
    geometry = MoEGeometry(experts=experts, top_k=top_k, expert_intermediate=expert_intermediate,
                           shared_intermediate=shared_intermediate, latent=latent, groups=groups,
                           topk_groups=topk_groups, keys=keys or {})
    return Part(params=p, active=active, moe=geometry)


def mamba2(
    hidden: int,
    heads: int,
    head_dim: int,
    groups: int,
    d_state: int,
    conv_kernel: int,
    *,
    conv_bias: bool = True,
    proj_bias: bool = False,
    out_bias: bool | None = None,  # defaults to proj_bias
    gated_norm: bool = True,
    intermediate: int | None = None,
    chunk_size: int | None = None,
    keys: dict | None = None,
) -> Part:
    inter = intermediate if intermediate is not None else heads * head_dim
    conv_dim = inter + 2 * groups * d_state
    p = (
        linear(hidden, inter + conv_dim + heads, proj_bias)  # in_proj: z, xBC, dt
        + conv_dim * conv_kernel + (conv_dim if conv_bias else 0)
        + 3 * heads  # dt_bias, A_log, D
        + (inter if gated_norm else 0)
        + linear(inter, hidden, proj_bias if out_bias is None else out_bias)
    )
    return Part(
        params=p,
        conv_elems=conv_dim * (conv_kernel - 1),
        ssm_elems=heads * head_dim * d_state,
        mamba2=Mamba2Geometry(heads=heads, head_dim=head_dim, groups=groups, d_state=d_state,
                              conv_kernel=conv_kernel, chunk_size=chunk_size, keys=keys or {}),
    )


def attention_keys(view, heads=("num_attention_heads",), kv_heads=("num_key_value_heads",),
                   head_dim=("head_dim",)) -> dict:
    """Where the usual attention fields are read from (the family passes its own spellings)."""
    return view.keys(heads=heads, kv_heads=kv_heads, head_dim=head_dim)


def moe_keys(view, experts, top_k=("num_experts_per_tok",), expert_intermediate=("moe_intermediate_size",)) -> dict:
    return view.keys(experts=experts, top_k=top_k, expert_intermediate=expert_intermediate)


def check_divisible(view, what: str, num: int, den: int, keys: str) -> None:
    if den <= 0 or num % den:
        from bringup.core.errors import UserError

        raise UserError(
            f"{view.label}: {what} ({num}) is not divisible by {den} ({keys}); "
            "the config is inconsistent, fix those fields in config.json"
        )


def embeddings(vocab: int, hidden: int, tied: bool, final_norm: bool = True) -> Part:
    """Token embeddings, the LM head unless tied to them, and the final norm."""
    return Part(params=vocab * hidden * (1 if tied else 2) + (hidden if final_norm else 0))


def gated_experts(hidden: int, inter: int) -> int:
    """One SwiGLU expert: gate and up (stored fused in transformers v5) and down."""
    return 3 * hidden * inter
