"""Zamba2: Mamba2 layers, some of which ("hybrid" layers) first run a *shared* transformer block.

A Mamba2 layer (map entry (mamba2, none)) is h = h + mamba(norm(h)). A hybrid layer (map entry
(attention+mamba2, mlp)) runs one of `num_mem_blocks` shared blocks, round-robin over the hybrid
layers, on [h, embeddings] concatenated (twice the width):
    t = linear(mlp(norm2(attention(norm1([h, emb])))))     no residual inside the block
    h = h + mamba(norm(h + t))
The block's weights are shared (held once, in `model.shared_blocks`), but each use keeps its own KV
cache (the map gives every hybrid layer its own KV layer id) and adds its own LoRA-style adapters
(q/k/v with use_shared_attention_adapter, and gate_up always), which live in the hybrid layer.
Attention scales by (head_dim / 2) ** -0.5 and uses RoPE only with use_mem_rope.

Checkpoint names (transformers' save_pretrained): `model.layers.N.mamba...` for a Mamba2 layer;
`model.layers.N.{linear, mamba_decoder.input_layernorm, mamba_decoder.mamba...}` for a hybrid one;
the shared block under the first hybrid layer that uses it, `model.layers.N.shared_transformer...`,
with the adapters of hybrid use i in its `..._adapter_list.i`. Later uses are ties (skipped if saved).
"""

from __future__ import annotations

import re

import torch
from torch import nn

from bringup.kernels.reference.mlp import activation

from .base import RMSNormWeight, linear
from .hybrid_attention import HybridAttention, RopeTable
from .mamba2 import Mamba2Mixer
from .stack import DecoderLayer, Layout, Parts, StackedCausalLM

EMBEDDINGS_KEY = "token_embeddings"  # batch.memo: the embedding output, which every shared block reads again


def zamba2_mamba2(cfg, layer, ops) -> Mamba2Mixer:
    return Mamba2Mixer(cfg.hidden_size, layer, ops, eps=1e-5,
                       dt_limit=(float(cfg.get("time_step_min", 0.001)), float("inf")),
                       proj_bias=bool(cfg.get("add_bias_linear", False)), conv_bias=True)


def _adapter(n_in: int, rank: int, n_out: int) -> nn.Sequential:
    return nn.Sequential(linear(n_in, rank, False), linear(rank, n_out, False))


class SharedBlock(nn.Module):
    """One shared transformer block: attention over [h, emb] and a gated MLP, weights used by several layers."""

    def __init__(self, cfg, layer, ops):
        super().__init__()
        h, inter = cfg.hidden_size, layer.mlp.intermediate
        eps = cfg.get("rms_norm_eps", 1e-5)
        self.ops, self.inter, self.act = ops, inter, cfg.get("hidden_act", "gelu")
        self.input_layernorm = RMSNormWeight(2 * h, eps)
        head_dim = layer.attention.head_dim
        self.self_attn = HybridAttention(cfg, layer, ops, scale=(head_dim / 2) ** -0.5,
                                         rope=bool(cfg.get("use_mem_rope", False)), in_dim=2 * h)
        self.pre_ff_layernorm = RMSNormWeight(h, eps)
        self.feed_forward = nn.Module()
        bias = bool(cfg.get("add_bias_linear", False))
        self.feed_forward.gate_up_proj = linear(h, 2 * inter, bias)
        self.feed_forward.down_proj = linear(inter, h, bias)

    def forward(self, hidden: torch.Tensor, layer: "HybridLayer", batch) -> torch.Tensor:
        ops, attn, ff = self.ops, self.self_attn, self.feed_forward
        x = torch.cat([hidden, batch.memo[EMBEDDINGS_KEY]], dim=-1)
        x = ops.rms_norm(x, self.input_layernorm.weight, self.input_layernorm.eps)
        T = x.shape[0]
        q, k, v = attn.q_proj(x), attn.k_proj(x), attn.v_proj(x)
        if layer.adapters is not None:  # this use's own low-rank additions to the shared projections
            a = layer.adapters
            q, k, v = q + a.q(x), k + a.k(x), v + a.v(x)
        out = attn.attend(q.view(T, attn.num_heads, attn.head_dim), k.view(T, attn.num_kv_heads, attn.head_dim),
                          v.view(T, attn.num_kv_heads, attn.head_dim), batch, layer.index)
        out = ops.rms_norm(out, self.pre_ff_layernorm.weight, self.pre_ff_layernorm.eps)
        gate_up = ff.gate_up_proj(out) + layer.gate_up_adapter(out)
        gate, up = gate_up.split(self.inter, dim=-1)
        return ff.down_proj(activation(self.act, gate) * up)


class HybridLayer(nn.Module):
    """A hybrid layer's own parts: the shared block's output projection, its Mamba2 and adapters."""

    def __init__(self, cfg, layer, ops):
        super().__init__()
        h, rank = cfg.hidden_size, int(cfg.get("adapter_rank", 128))
        self.index, self.mixer_kind, self.ffn_kind = layer.index, layer.mixer, layer.ffn
        self.linear = linear(h, h, False)
        self.mamba_decoder = nn.Module()
        self.mamba_decoder.input_layernorm = RMSNormWeight(h, cfg.get("rms_norm_eps", 1e-5))
        self.mamba_decoder.mamba = zamba2_mamba2(cfg, layer, ops)
        self.gate_up_adapter = _adapter(h, rank, 2 * layer.mlp.intermediate)
        self.adapters = None
        if cfg.get("use_shared_attention_adapter", False):
            self.adapters = nn.Module()
            for name in ("q", "k", "v"):
                self.adapters.add_module(name, _adapter(2 * h, rank, 2 * h))
        self.ops = ops
        self.num_kv_heads, self.head_dim = layer.attention.kv_heads, layer.attention.head_dim
        self.conv_shape, self.ssm_shape = self.mamba_decoder.mamba.conv_shape, self.mamba_decoder.mamba.ssm_shape
        self._block: list[SharedBlock] = []  # a plain list: the block is registered once, on the model

    @property
    def mixer_module(self) -> nn.Module:  # cache_spec reads both caches' geometry here
        return self

    ffn_module = None

    def bind(self, block: SharedBlock) -> None:
        self._block = [block]

    def forward(self, hidden: torch.Tensor, batch) -> torch.Tensor:
        t = self.linear(self._block[0](hidden, self, batch))
        norm = self.mamba_decoder.input_layernorm
        return hidden + self.mamba_decoder.mamba(self.ops.rms_norm(hidden + t, norm.weight, norm.eps), batch)


def _layer(cfg, layer, parts, ops) -> nn.Module:
    return HybridLayer(cfg, layer, ops) if layer.mixer == "attention+mamba2" else DecoderLayer(cfg, layer, parts, ops)


_SHARED = re.compile(r"^model\.layers\.(\d+)\.shared_transformer\.(.+)$")
_ADAPTER = re.compile(r"^self_attn\.linear_([qkv])_adapter_list\.(\d+)\.(.+)$|^feed_forward\.gate_up_proj_adapter_list\.(\d+)\.(.+)$")


class Zamba2ForCausalLM(StackedCausalLM):
    layer_class = staticmethod(_layer)
    parts = Parts(
        family="Zamba2",
        mixers={"mamba2": zamba2_mamba2},
        ffns={},
        layout=Layout(root="model", embed="embed_tokens", final_norm="final_layernorm",
                      mixer_names={"mamba2": "mamba"}, ffn_name="feed_forward",
                      mixer_norm="input_layernorm", ffn_norm="input_layernorm", eps_default=1e-5),
    )

    def __init__(self, config: dict, ops, layer_map):
        super().__init__(config, ops, layer_map)
        hybrid = [l for l in layer_map.layers if l.mixer == "attention+mamba2"]
        self.hybrid_ids = [l.index for l in hybrid]
        n_blocks = min(int(self.config.get("num_mem_blocks", 1)), len(hybrid))
        # Block b is built from the map entry of its first use (attention geometry is the same for all).
        self.shared_blocks = nn.ModuleList(SharedBlock(self.config, hybrid[b], ops) for b in range(n_blocks))
        for i, layer_id in enumerate(self.hybrid_ids):
            self.decoder.layers[layer_id].bind(self.shared_blocks[i % n_blocks])
        self.rope = RopeTable(self.config, self.shared_blocks[0].self_attn.head_dim) \
            if n_blocks and self.config.get("use_mem_rope", False) else None

    def finish_loading(self) -> None:
        if self.rope is not None:
            self.rope.refresh()

    def begin(self, batch) -> None:
        if self.rope is not None:
            self.rope.begin(batch)

    def embed(self, batch) -> torch.Tensor:
        hidden = super().embed(batch)
        batch.memo[EMBEDDINGS_KEY] = hidden
        return hidden

    def map_weight_name(self, name: str):
        if self.tied and name == "lm_head.weight":
            return None
        m = _SHARED.match(name)
        if not m:
            return name, None
        use = self.hybrid_ids.index(int(m.group(1)))
        if use >= len(self.shared_blocks):
            return None  # a tied copy of an earlier use's block
        rest = m.group(2)
        a = _ADAPTER.match(rest)
        if a is None:
            return f"shared_blocks.{use}.{rest}", None
        if a.group(1):  # q/k/v adapter of hybrid use i
            return f"model.layers.{self.hybrid_ids[int(a.group(2))]}.adapters.{a.group(1)}.{a.group(3)}", None
        return f"model.layers.{self.hybrid_ids[int(a.group(4))]}.gate_up_adapter.{a.group(5)}", None
