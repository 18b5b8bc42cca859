"""NemotronH: Nemotron-H, Nemotron-Nano-v2, Nemotron-3 Nano/Super/Ultra.

Each *block* is one mixer or one FFN (EXPECTED.md): `hybrid_override_pattern` has one character
per block (M = Mamba2, * = attention, - = MLP, E = MoE; NVIDIA's remote code reads any other
character as MoE), newer configs give `layers_block_type` instead. The list length wins over
`num_hidden_layers`, as in transformers and SGLang.
"""

from __future__ import annotations

from bringup.core.errors import UserError
from bringup.core.families import _blocks as b
from bringup.core.families._assemble import FamilyResult, LayerSpec
from bringup.core.families._view import ConfigView

MODEL_TYPES = ("nemotron_h",)

_CHARS = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
# Block names across config generations (transformers v5 renamed mamba/attention).
_NAMES = {
    "mamba": "mamba", "linear_attention": "mamba", "m": "mamba",
    "attention": "attention", "full_attention": "attention",
    "mlp": "mlp", "moe": "moe",
}


def _from_pattern(view: ConfigView, key: str, notes: list[str]) -> list[str]:
    pattern = view.str(key)
    if not pattern or len(pattern) > 4096:
        raise view.bad(key, pattern, "a string of block characters M, *, - or E")
    odd = sorted({c for c in pattern if c not in _CHARS})
    if odd:
        notes.append(f"{key}: characters {''.join(odd)!r} read as MoE blocks, as NVIDIA's configuration_nemotron_h.py does")
    return [_CHARS.get(c, "moe") for c in pattern]


def _from_list(view: ConfigView, key: str) -> list[str]:
    names = view.list(key, item=str)
    if not names:
        raise view.bad(key, names, "a non-empty list of mamba | attention | mlp | moe")
    out = []
    for n in names:
        if n.lower() not in _NAMES:
            raise view.bad(key, n, "block types mamba | attention | mlp | moe (or linear_attention | full_attention)")
        out.append(_NAMES[n.lower()])
    return out


def block_types(view: ConfigView, notes: list[str]) -> list[str]:
    if view.has("layers_block_type"):
        blocks = _from_list(view, "layers_block_type")
    elif view.has("layer_types"):
        blocks = _from_list(view, "layer_types")
    elif view.has("hybrid_override_pattern"):
        blocks = _from_pattern(view, "hybrid_override_pattern", notes)
    else:
        raise UserError(
            f"{view.label}: a nemotron_h config needs 'hybrid_override_pattern' or 'layers_block_type' "
            "to say which block is Mamba2, attention, MLP or MoE; add one to config.json"
        )
    if view.has("num_hidden_layers"):
        n = view.num_layers("num_hidden_layers")
        if n != len(blocks):
            notes.append(f"num_hidden_layers is {n} but the block list has {len(blocks)} entries; the list wins")
    return blocks


def mtp_block_types(view: ConfigView, notes: list[str]) -> list[str]:
    # transformers writes its default MTP block list into every config it saves; the blocks exist
    # only when num_nextn_predict_layers > 0, so an explicit 0 means none.
    if view.has("num_nextn_predict_layers") and view.int("num_nextn_predict_layers", minimum=0) == 0:
        return []
    if view.has("mtp_layers_block_type"):
        return _from_list(view, "mtp_layers_block_type")
    if view.has("mtp_hybrid_override_pattern"):
        return _from_pattern(view, "mtp_hybrid_override_pattern", notes)
    if view.int("num_nextn_predict_layers", default=0, minimum=0) > 0:
        return ["attention", "moe"]  # transformers' default MTP stack
    return []


def _parts(view: ConfigView) -> dict[str, LayerSpec]:
    h = view.int("hidden_size", default=4096)
    heads = view.int("num_attention_heads", default=32)
    kv_heads = view.int("num_key_value_heads", default=heads)
    head_dim = view.int("head_dim", "attention_head_dim", default=128)
    use_bias = view.bool("use_bias", default=False)
    mlp_bias = view.bool("mlp_bias", default=False)
    mamba = b.mamba2(
        h,
        heads=view.int("mamba_num_heads", default=128),
        head_dim=view.int("mamba_head_dim", default=64),
        groups=view.int("n_groups", "mamba_n_groups", default=8),
        d_state=view.int("ssm_state_size", "mamba_d_state", default=128),
        conv_kernel=view.int("conv_kernel", "mamba_d_conv", default=4),
        conv_bias=view.bool("use_conv_bias", "mamba_conv_bias", default=True),
        proj_bias=use_bias,
        chunk_size=view.int("chunk_size", "mamba_chunk_size", default=128, minimum=0),
        keys=view.keys(heads="mamba_num_heads", head_dim="mamba_head_dim", groups=("n_groups", "mamba_n_groups"),
                       d_state=("ssm_state_size", "mamba_d_state"), conv_kernel=("conv_kernel", "mamba_d_conv"),
                       chunk_size=("chunk_size", "mamba_chunk_size")),
    )
    b.check_divisible(view, "mamba intermediate size", mamba.mamba2.intermediate, mamba.mamba2.groups,
                      "mamba_num_heads * mamba_head_dim / n_groups")
    attn = b.attention(h, heads, kv_heads, head_dim, keys=b.attention_keys(view, head_dim=("head_dim", "attention_head_dim")))
    dense = b.mlp(h, view.int("intermediate_size", default=21504), gated=False, bias=mlp_bias)
    experts = view.int("n_routed_experts", "num_local_experts", default=8)
    top_k = view.int("num_experts_per_tok", default=2)
    latent = view.int("moe_latent_size", default=0, minimum=0)
    width = latent or h
    moe_inter = view.int("moe_intermediate_size", default=7688)
    shared_inter = view.int("moe_shared_expert_intermediate_size", default=7688)
    moe = b.moe(
        h, experts, top_k,
        expert_params=2 * width * moe_inter,  # up and down, not gated
        router=experts * h,
        shared=b.mlp(h, shared_inter, gated=False, bias=mlp_bias).params,
        other=(b.linear(h, latent, mlp_bias) + b.linear(latent, h, mlp_bias)) if latent else 0,
        expert_intermediate=moe_inter, shared_intermediate=shared_inter, latent=latent,
        groups=view.int("n_group", default=1, minimum=0), topk_groups=view.int("topk_group", default=1, minimum=0),
        keys=dict(b.moe_keys(view, ("n_routed_experts", "num_local_experts")), groups="n_group", topk_groups="topk_group"),
    )
    norm = b.norm(h)
    return {
        "mamba": LayerSpec("mamba2", "none", mamba + norm),
        "attention": LayerSpec("attention", "none", attn + norm),
        "mlp": LayerSpec("none", "mlp", dense + norm),
        "moe": LayerSpec("none", "moe", moe + norm),
    }


def build(view: ConfigView) -> FamilyResult:
    notes: list[str] = []
    blocks = block_types(view, notes)
    mtp = mtp_block_types(view, notes)
    parts = _parts(view)
    h = view.int("hidden_size", default=4096)
    vocab = view.int("vocab_size", default=131072)
    tied = view.bool("tie_word_embeddings", default=False)
    outside = b.Part(params=vocab * h * (1 if tied else 2) + h)  # embeddings, lm_head, norm_f
    return FamilyResult(
        layers=[parts[k] for k in blocks],
        mtp_layers=[parts[k] for k in mtp],
        hybrid_family="mamba2",
        outside=outside,
        notes=notes,
    )
