"""Zamba2: Mamba2 layers, some of which are *hybrid*: a shared transformer block runs first.

`layers_block_type[i]` is `mamba` or `hybrid` (transformers v5: linear_attention | hybrid). The
shared blocks (attention over [hidden, embeddings] concatenated, so twice the width, plus a SwiGLU
MLP) exist `num_mem_blocks` times and are reused round-robin by the hybrid layers; each hybrid
layer adds its own linear projection and its own LoRA adapters. Shared weights are counted once,
outside the layers; every hybrid layer keeps its own KV cache.
"""

from __future__ import annotations

import dataclasses

from bringup.core.families import _blocks as b
from bringup.core.families._assemble import FamilyResult, LayerSpec
from bringup.core.families._view import ConfigView

MODEL_TYPES = ("zamba2",)
_TYPES = {"mamba": "mamba", "linear_attention": "mamba", "m": "mamba", "hybrid": "hybrid", "h": "hybrid"}
_DEFAULT = ["mamba"] + (["mamba"] * 5 + ["hybrid"]) * 7 + ["mamba"] * 4 + ["hybrid"] + ["mamba"] * 3 + ["hybrid"] + ["mamba"] * 2


def kinds(view: ConfigView) -> list[str]:
    if not view.has("layers_block_type"):
        return list(_DEFAULT)
    types = view.list("layers_block_type", item=str)
    if not types or any(t.lower() not in _TYPES for t in types):
        raise view.bad("layers_block_type", types, "a list of mamba | hybrid")
    return [_TYPES[t.lower()] for t in types]


def build(view: ConfigView) -> FamilyResult:
    h = view.int("hidden_size", default=2560)
    blocks = kinds(view)
    heads = view.int("num_attention_heads", default=32)
    kv_heads = view.int("num_key_value_heads", default=heads)
    b.check_divisible(view, "2 x hidden_size", 2 * h, heads, "2 x hidden_size / num_attention_heads")
    head_dim = 2 * h // heads
    inter = view.int("intermediate_size", default=4 * h)
    rank = view.int("adapter_rank", default=128)
    mem_blocks = view.int("num_mem_blocks", default=1)
    bias = view.bool("add_bias_linear", default=False)
    m_heads = view.int("n_mamba_heads", default=8)
    m_inner = view.int("mamba_expand", default=2) * h
    b.check_divisible(view, "mamba width (mamba_expand x hidden_size)", m_inner, m_heads, "n_mamba_heads")
    mamba = b.mamba2(
        h, m_heads, m_inner // m_heads,
        groups=view.int("mamba_ngroups", default=1),
        d_state=view.int("mamba_d_state", default=64),
        conv_kernel=view.int("mamba_d_conv", default=4),
        conv_bias=True,
        proj_bias=bias,
        chunk_size=view.int("chunk_size", default=256, minimum=0),
        keys=view.keys(heads="n_mamba_heads", head_dim="mamba_expand", groups="mamba_ngroups", d_state="mamba_d_state",
                       conv_kernel="mamba_d_conv", chunk_size="chunk_size"),
    ) + b.norm(h)
    attn = b.attention(h, heads, kv_heads, head_dim, in_dim=2 * h, keys=b.attention_keys(view, head_dim="hidden_size"))
    # One shared transformer block: attention, its two norms, the MLP.
    shared = attn.params + 2 * h + h + b.linear(h, 2 * inter, bias) + b.linear(inter, h, bias)
    # Per hybrid layer: its own linear, its MLP adapter and (optionally) q/k/v attention adapters.
    adapters = h * rank + rank * 2 * inter
    if view.bool("use_shared_attention_adapter", default=False):
        adapters += 3 * (2 * h * rank + rank * 2 * h)
    shared_attention = dataclasses.replace(attn.attention, shared_block=True)
    hybrid = mamba + b.Part(params=h * h + adapters, kv_elems=attn.kv_elems, attention=shared_attention,
                            mlp=b.mlp(h, inter).mlp)
    layers = [
        LayerSpec("attention+mamba2", "mlp", hybrid) if k == "hybrid" else LayerSpec("mamba2", "none", mamba)
        for k in blocks
    ]
    used_blocks = min(mem_blocks, sum(1 for k in blocks if k == "hybrid"))
    outside = b.embeddings(view.int("vocab_size", default=32000), h, view.bool("tie_word_embeddings", default=True))
    outside.params += used_blocks * shared
    return FamilyResult(
        layers=layers,
        hybrid_family="mamba2",
        outside=outside,
        notes=[f"{used_blocks} shared transformer block(s) reused by the hybrid layers, counted once"],
    )
