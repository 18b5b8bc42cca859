"""A decoder assembled from the layer map: one module per (mixer, ffn) the map lists.

The layer map (`bringup.core.families`) is the one place that knows a model's block list. A family
model here says only how each *kind* is built and what the checkpoint calls the parts:

    class MyHybridForCausalLM(StackedCausalLM):
        parts = Parts(
            mixers={"attention": MyAttention, "mamba2": Mamba2Mixer},   # (cfg, layer, ops) -> module
            ffns={"mlp": MyMLP, "moe": MyMoE},
            layout=Layout(root="model", embed="embed_tokens", final_norm="norm",
                          mixer_names={"attention": "self_attn", "mamba2": "mamba"}, ffn_name="mlp",
                          mixer_norm="input_layernorm", ffn_norm="post_attention_layernorm"),
        )

Every layer is pre-norm residual: h = h + mixer(norm(h), batch); h = h + ffn(norm(h)); a part
whose kind is "none" is left out (a NemotronH block is a mixer or an FFN). A family may scale the
two terms of each residual add (`DecoderLayer.factors`: Granite's residual_multiplier, MiniMax's
alpha/beta) and take the normed value as the residual (`postnorm`: MiniMax): still the same loop,
so every family's residual add runs fused with the next norm (ops.add_rms_norm). A mixer module of a KV
layer exposes `num_kv_heads` and `head_dim`, one of a state layer `conv_shape` and `ssm_shape`: the
engine sizes its pools from them (`cache_spec`), at the layers the map names.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Mapping

import torch
from torch import nn

from bringup.core.layermap.vocabulary import Layer

from .base import CacheSpec, CausalLM, Config, RMSNormWeight, linear

# Builds one part of one layer from the config, the map's entry for the layer and the op set.
Builder = Callable[[Config, Layer, object], nn.Module]


class UnsupportedLayerError(ValueError):
    """The layer map lists a mixer or FFN kind this engine model has no module for."""


@dataclass(frozen=True)
class Layout:
    """What a family's checkpoint calls the parts (module names are weight names) and its norms."""

    root: str  # the decoder's attribute: "model" (model.layers.N...) or "backbone"
    embed: str  # the token embedding under root
    final_norm: str  # the norm before the LM head, under root
    mixer_names: Mapping[str, str]  # mixer kind -> attribute in a layer, e.g. {"attention": "self_attn"}
    ffn_name: str  # the FFN's attribute in a layer, e.g. "mlp"
    mixer_norm: str
    ffn_norm: str  # may equal mixer_norm when a layer never has both parts
    eps_keys: tuple[str, ...] = ("rms_norm_eps",)  # config keys of the norms' epsilon, first found wins
    eps_default: float = 1e-6
    norm_in_float32: bool = False  # multiply the norm weight in float32 (NemotronH)


@dataclass(frozen=True)
class Parts:
    """A family's modules per mixer kind and per FFN kind, and their layout."""

    mixers: Mapping[str, Builder]
    ffns: Mapping[str, Builder]
    layout: Layout
    family: str = ""  # for messages: "NemotronH", "Llama"

    def __post_init__(self) -> None:
        unnamed = sorted(set(self.mixers) - set(self.layout.mixer_names))
        if unnamed:  # a programming error in the family's model, caught when its class is defined
            raise TypeError(f"{self.family}: Layout.mixer_names lacks the module name of mixer kind(s) {unnamed}")


def norm_eps(cfg: Config, layout: Layout) -> float:
    for key in layout.eps_keys:
        value = cfg.get(key)
        if value is not None:
            return float(value)
    return layout.eps_default


def _build(table: Mapping[str, Builder], kind: str, what: str, parts: Parts, cfg: Config, layer: Layer, ops):
    if kind not in table:
        raise UnsupportedLayerError(
            f"layer {layer.index} is a {kind!r} {what}, which the engine's {parts.family} model does not build "
            f"(it builds {what}s {', '.join(sorted(table))}); the embedded engine cannot run this model yet"
        )
    return table[kind](cfg, layer, ops)


class DecoderLayer(nn.Module):
    """One entry of the layer map: h = h + mixer(norm(h)); h = h + ffn(norm(h)), parts as the map says."""

    def __init__(self, cfg: Config, layer: Layer, parts: Parts, ops):
        super().__init__()
        lay, eps = parts.layout, norm_eps(cfg, parts.layout)
        self.index, self.ops, self.in_float32 = layer.index, ops, lay.norm_in_float32
        self.mixer_kind, self.ffn_kind = layer.mixer, layer.ffn
        self.mixer_name = self.ffn_name = None
        if layer.mixer != "none":
            module = _build(parts.mixers, layer.mixer, "mixer", parts, cfg, layer, ops)
            self.mixer_name = lay.mixer_names[layer.mixer]
            self.add_module(lay.mixer_norm, RMSNormWeight(cfg.hidden_size, eps))
            self.add_module(self.mixer_name, module)
        if layer.ffn != "none":
            if self.mixer_name is not None and (lay.ffn_norm == lay.mixer_norm or lay.ffn_name == self.mixer_name):
                raise UnsupportedLayerError(
                    f"layer {layer.index} has both a {layer.mixer!r} mixer and a {layer.ffn!r} FFN, but the engine's "
                    f"{parts.family} model builds one part per layer")
            module = _build(parts.ffns, layer.ffn, "FFN", parts, cfg, layer, ops)
            self.ffn_name = lay.ffn_name
            self.add_module(lay.ffn_norm, RMSNormWeight(cfg.hidden_size, eps))
            self.add_module(self.ffn_name, module)
        self.mixer_norm, self.ffn_norm = lay.mixer_norm, lay.ffn_norm
        # (residual factor, part factor) of the mixer's and the FFN's residual add:
        # h = h * a + part(norm(h)) * b; with postnorm, h = norm(h) * a + part(norm(h)) * b.
        self.factors = {"mixer": (1.0, 1.0), "ffn": (1.0, 1.0)}
        self.postnorm = False

    # Not named `mixer` / `ffn`: those are module names some checkpoints use (NemotronH's `mixer`).
    @property
    def mixer_module(self) -> nn.Module | None:
        return getattr(self, self.mixer_name) if self.mixer_name else None

    @property
    def ffn_module(self) -> nn.Module | None:
        return getattr(self, self.ffn_name) if self.ffn_name else None

    def _norm(self, hidden: torch.Tensor, name: str) -> torch.Tensor:
        w = getattr(self, name)
        if self.in_float32:
            return self.ops.rms_norm(hidden, w.weight, w.eps, multiply_in_float32=True)
        return self.ops.rms_norm(hidden, w.weight, w.eps)

    def forward(self, hidden: torch.Tensor, batch) -> torch.Tensor:
        for norm, part, takes_batch, (a, b) in self.parts_in_order():
            x = self._norm(hidden, norm)
            residual = x if self.postnorm else hidden
            delta = total(part(x, batch) if takes_batch else part(x))
            hidden = scaled(residual, a) + scaled(delta, b)
        return hidden

    def parts_in_order(self):
        """(norm name, part module, takes the batch, (residual factor, part factor)) for the mixer then
        the FFN, those present."""
        out = []
        if self.mixer_name is not None:
            out.append((self.mixer_norm, self.mixer_module, True, self.factors["mixer"]))
        if self.ffn_name is not None:
            out.append((self.ffn_norm, self.ffn_module, False, self.factors["ffn"]))
        return out


@dataclass(frozen=True)
class PostNormed:
    """A part's output still to go through the part's own RMSNorm (Gemma's post-attention and
    post-MLP norms): the residual add takes that norm into its own kernel (ops.add_rms_norm's
    delta_weight, one launch for both); anywhere else `total` applies it first."""

    out: torch.Tensor
    norm: nn.Module  # with weight and eps
    ops: object
    in_float32: bool

    def applied(self) -> torch.Tensor:
        return self.ops.rms_norm(self.out, self.norm.weight, self.norm.eps, multiply_in_float32=self.in_float32)


def add_and_norm(ops, hidden, delta, norm, in_float32: bool):
    """ops.add_rms_norm of hidden + delta and `norm`, a PostNormed delta's norm inside the same op."""
    if isinstance(delta, PostNormed) and delta.in_float32 == in_float32:
        return ops.add_rms_norm(hidden, delta.out, norm.weight, norm.eps, multiply_in_float32=in_float32,
                                delta_weight=delta.norm.weight, delta_eps=delta.norm.eps)
    return ops.add_rms_norm(hidden, total(delta) if isinstance(delta, PostNormed) else delta, norm.weight,
                            norm.eps, multiply_in_float32=in_float32)


def scaled(x, factor: float):
    """x * factor, skipped at 1 (no kernel); a MoE's parts are summed first."""
    return x if factor == 1.0 else total(x) * factor


def total(delta):
    """A part's output as one [T, H] tensor: a MoE may give (shared [T, H] or [T, S, H], routed [T, H]
    or [T, k, H]), a part with a post norm a PostNormed."""
    if isinstance(delta, PostNormed):
        return delta.applied()
    if isinstance(delta, tuple):
        from bringup.kernels.reference.add_rms_norm import moe_sum

        return moe_sum(*delta)
    return delta


class StackedCausalLM(CausalLM):
    """Embedding, the layers the map lists, final norm, LM head. Subclasses set `parts` and map
    checkpoint names (`map_weight_name`)."""

    parts: Parts
    layer_class: type[DecoderLayer] = DecoderLayer  # a family with its own wiring subclasses DecoderLayer
    embed_scale = 1.0  # muP-style multipliers (Granite, Falcon-H1): embeddings times this,
    logit_scale = 1.0  # logits times this
    # Called after each block as hook(layer, hidden) -> hidden when set (core/numerics captures each
    # block's output and injects faults with it); None costs one attribute test per block.
    block_hook: Callable | None = None

    def __init__(self, config: dict, ops, layer_map):
        super().__init__(config, ops, layer_map)
        cfg, lay = self.config, self.parts.layout
        decoder = nn.Module()
        # An explicit (uninitialised) weight: Embedding's own normal_ init, even on the meta device,
        # imports torch._dynamo (~3 s of every engine start on CPU) for values the loader overwrites.
        embedding = nn.Embedding(cfg.vocab_size, cfg.hidden_size,
                                 _weight=torch.empty(cfg.vocab_size, cfg.hidden_size)).requires_grad_(False)
        decoder.add_module(lay.embed, embedding)
        decoder.layers = nn.ModuleList(self.layer_class(cfg, layer, self.parts, ops) for layer in layer_map.layers)
        decoder.add_module(lay.final_norm, RMSNormWeight(cfg.hidden_size, norm_eps(cfg, lay)))
        self.add_module(lay.root, decoder)
        self.lm_head = linear(cfg.hidden_size, cfg.vocab_size, False)
        self.tie_weights()

    @property
    def decoder(self) -> nn.Module:
        return getattr(self, self.parts.layout.root)

    @property
    def input_embedding(self) -> nn.Embedding:
        return getattr(self.decoder, self.parts.layout.embed)

    @property
    def cache_spec(self) -> CacheSpec:
        kv, state = tuple(self.layer_map.kv_layers), tuple(self.layer_map.state_layers)
        layers = self.decoder.layers
        attn = layers[kv[0]].mixer_module if kv else None
        ssm = layers[state[0]].mixer_module if state else None
        sliding = tuple(i for i in self.layer_map.sliding_attention_layers if i in kv)  # those with a cache
        windows = {int(layers[i].mixer_module.window) for i in sliding if getattr(layers[i].mixer_module, "window", None)}
        return CacheSpec(
            kv_layer_ids=kv,
            num_kv_heads=attn.num_kv_heads if attn is not None else 0,
            head_dim=attn.head_dim if attn is not None else 0,
            state_layer_ids=state,
            conv_shape=tuple(ssm.conv_shape) if ssm is not None else (),
            ssm_shape=tuple(ssm.ssm_shape) if ssm is not None else (),
            # One window for all sliding layers (every family so far); the pool keeps the widest.
            swa_layer_ids=sliding if windows else (),
            sliding_window=max(windows, default=0),
        )

    def begin(self, batch) -> None:
        """Hook before the layers run: put values every layer shares into `batch.memo` (e.g. RoPE)."""

    def embed(self, batch) -> torch.Tensor:
        """The token embeddings the first layer reads (Zamba2 keeps them for its shared blocks)."""
        hidden = self.input_embedding(batch.input_ids)
        return hidden * self.embed_scale if self.embed_scale != 1.0 else hidden

    def forward(self, batch) -> torch.Tensor:
        # Each part's residual add is done together with the next part's norm, in one op
        # (ops.add_rms_norm: one kernel on a GPU where the unfused pair takes several).
        self.begin(batch)
        hidden = self.embed(batch)
        # A block hook sees each layer's full output, and a layer that is not a DecoderLayer (Zamba2's
        # hybrid layers) has its own residual: those keep the unfused loop.
        if self.block_hook is not None or any(not isinstance(layer, DecoderLayer) for layer in self.decoder.layers):
            for layer in self.decoder.layers:
                hidden = layer(hidden, batch)
                if self.block_hook is not None:
                    hidden = self.block_hook(layer, hidden)
            delta = None
        else:
            ops, f32 = self.ops, self.parts.layout.norm_in_float32
            delta = None
            for layer in self.decoder.layers:
                for name, part, takes_batch, (a, b) in layer.parts_in_order():
                    hidden, x = add_and_norm(ops, hidden, delta, getattr(layer, name), f32)
                    if layer.postnorm:
                        hidden = x
                    hidden = scaled(hidden, a)
                    delta = scaled(part(x, batch) if takes_batch else part(x), b)
        last = batch.last_token_hidden(hidden)
        if isinstance(delta, tuple):
            delta = tuple(None if d is None else batch.last_token_hidden(d) for d in delta)
        elif isinstance(delta, PostNormed):  # a row-wise norm: the last rows first
            delta = replace(delta, out=batch.last_token_hidden(delta.out))
        elif delta is not None:
            delta = batch.last_token_hidden(delta)
        norm = getattr(self.decoder, self.parts.layout.final_norm)
        _, last = add_and_norm(self.ops, last, delta, norm, self.parts.layout.norm_in_float32)
        logits = self.lm_head(last).float()
        return logits * self.logit_scale if self.logit_scale != 1.0 else logits
