"""What every model of the engine shares: its cache geometry, weight loading, and the forward contract.

A model is built from the raw config.json dict, a kernel op set (`bringup.kernels.dispatch`) and the
model's layer map (`bringup.core.families.build_layer_map`), the one place that knows which layer
is which: a model never reads its block list from the config itself.
`forward(batch: ForwardBatch) -> logits [B, vocab]` (float32, last new token of each request).
`cache_spec` tells the engine which pools to allocate: KV for `kv_layer_ids` and state slots for
`state_layer_ids`, with GLOBAL layer ids (the ids the model asks the pools for).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

import torch
from torch import nn

from bringup.core.errors import UserError
from bringup.core.layermap.constraints import map_problems, problems_message


# Names of static activation scales quantized checkpoints carry beside their weights.
ACTIVATION_SCALES = frozenset({"input_scale", "k_scale", "v_scale", "input_global_scale"})
FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e5m2)


class WeightLoadError(ValueError):
    """A checkpoint does not fit the model built from its config."""


class ModelSizeError(UserError):
    """The config's sizes contradict what the model's modules assume (core/layermap/constraints.py)."""


@dataclass(frozen=True)
class CacheSpec:
    kv_layer_ids: tuple[int, ...] = ()
    num_kv_heads: int = 0
    head_dim: int = 0
    state_layer_ids: tuple[int, ...] = ()
    conv_shape: tuple[int, ...] = ()  # per slot and layer, e.g. (conv_dim, conv_kernel - 1)
    ssm_shape: tuple[int, ...] = ()  # per slot and layer, e.g. (heads, head_dim, d_state)
    # The sliding-window layers among kv_layer_ids and their window (tokens): with full layers
    # beside them, the engine keeps their K/V in a separate SWA pool that holds only the window.
    swa_layer_ids: tuple[int, ...] = ()
    sliding_window: int = 0
    # V's size per head where it differs from K's (0: the same). latent_kv (MLA): the pool keeps one
    # vector per token (compressed latent + rope key, `head_dim` wide) read as K and as V.
    v_head_dim: int = 0
    latent_kv: bool = False
    extra: dict = field(default_factory=dict, compare=False)


class Config:
    """Read-only attribute access to a config.json dict, with defaults: `cfg.get("x", 1)`, `cfg.hidden_size`."""

    def __init__(self, raw: dict):
        self.raw = dict(raw)

    def __getattr__(self, name):
        try:
            return self.__dict__["raw"][name]
        except KeyError:
            raise AttributeError(f"config has no {name!r}") from None

    def get(self, name, default=None):
        value = self.raw.get(name)
        return default if value is None else value


class RMSNormWeight(nn.Module):
    """Holds an RMSNorm weight under the name checkpoints use (`<module>.weight`)."""

    def __init__(self, size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size), requires_grad=False)
        self.eps = float(eps)


class CausalLM(nn.Module):
    """Base class: subclasses build their modules and implement forward, map_weight_name, cache_spec."""

    # Parameter-name substrings kept in float32 whatever the model dtype (e.g. MoE router weights).
    keep_float32: tuple[str, ...] = ()

    def __init__(self, config: dict, ops, layer_map):
        super().__init__()
        problems = map_problems(layer_map)
        if problems:  # the same checks inspect and validate report, so a config that validates builds
            raise ModelSizeError(problems_message(layer_map.name or "model", problems))
        self.config = Config(config)
        self.ops = ops
        self.layer_map = layer_map  # a LayerMap: which mixer and FFN each layer has, which hold caches

    @property
    def cache_spec(self) -> CacheSpec:
        raise NotImplementedError

    def map_weight_name(self, name: str) -> tuple[str, int | None] | None:
        """Checkpoint tensor name -> (parameter name, index into its first dim or None); None skips it."""
        raise NotImplementedError

    def finish_loading(self) -> None:
        """Hook after all weights are in (e.g. derived tensors)."""

    def tie_weights(self) -> None:
        """Share lm_head with the input embedding where the config ties them. Called at build time
        and again after moving off the meta device (which replaces parameters and so unties them)."""
        if self.tied:
            self.lm_head.weight = self.input_embedding.weight

    @property
    def tied(self) -> bool:
        return bool(self.config.get("tie_word_embeddings", False))

    @property
    def input_embedding(self) -> nn.Embedding:
        raise NotImplementedError

    # Weight loading -----------------------------------------------------------------------------
    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Copy checkpoint tensors into the parameters (converting dtype and device), then check
        that every parameter was filled exactly once."""
        params = dict(self.named_parameters())
        filled: dict[str, set] = {}
        for name, tensor in weights:
            target = self.map_weight_name(name)
            if target is None:
                continue
            pname, index = target
            if pname not in params and pname.endswith(".weight_scale") and pname + "_inv" in params:
                pname += "_inv"  # modelopt's per-tensor `weight_scale` multiplies as `weight_scale_inv` does
            if pname not in params and pname.rpartition(".")[2] in ACTIVATION_SCALES:
                continue  # static activation scales: the engine's W8A16 kernels keep activations as they are
            if pname not in params:
                raise WeightLoadError(
                    f"checkpoint weight {name!r} has no place in the {type(self).__name__} built from this config "
                    f"(looked for parameter {pname!r}); is config.json from the same checkpoint?"
                )
            param = params[pname]
            dest = param.data if index is None else param.data[index]
            if tensor.numel() == 1 and dest.numel() == 1:
                tensor = tensor.reshape(dest.shape)  # a per-tensor scale, stored as a scalar
            if tensor.dtype in FP8_DTYPES and dest.dtype != tensor.dtype:
                raise WeightLoadError(
                    f"checkpoint weight {name!r} is {str(tensor.dtype).removeprefix('torch.')} but the model holds "
                    f"{pname!r} in {str(dest.dtype).removeprefix('torch.')}: its quantization_config does not say "
                    "this module is quantized; pass --dtype bfloat16 to dequantise the checkpoint at load")
            if tuple(dest.shape) != tuple(tensor.shape):
                raise WeightLoadError(
                    f"checkpoint weight {name!r} has shape {list(tensor.shape)} but the model built from config.json "
                    f"expects {list(dest.shape)}; is config.json from the same checkpoint?"
                )
            key = "all" if index is None else index
            if key in filled.setdefault(pname, set()):
                raise WeightLoadError(f"checkpoint holds {name!r} twice")
            with torch.no_grad():
                dest.copy_(tensor)
            filled[pname].add(key)
        missing = []
        for pname, param in params.items():
            got = filled.get(pname, set())
            if "all" in got or (got and len(got) == param.shape[0]):
                continue
            missing.append(pname if not got else f"{pname} ({len(got)} of {param.shape[0]})")
        if missing:
            shown = ", ".join(missing[:8]) + (f" and {len(missing) - 8} more" if len(missing) > 8 else "")
            raise WeightLoadError(f"checkpoint lacks {len(missing)} weight(s) the model needs: {shown}")
        self.finish_loading()

    def apply_float32_exceptions(self) -> None:
        for name, param in self.named_parameters():
            if any(key in name for key in self.keep_float32):
                param.data = param.data.float()

    @property
    def dtype(self) -> torch.dtype:
        """The activations' dtype: that of the first floating-point parameter (quantized layers
        hold uint8 blocks or fp8 weights beside it)."""
        params = list(self.parameters())
        return next((p.dtype for p in params if p.is_floating_point() and p.element_size() > 1), params[0].dtype)

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device


def linear(in_features: int, out_features: int, bias: bool) -> nn.Linear:
    layer = nn.Linear(in_features, out_features, bias=bias)
    layer.requires_grad_(False)
    return layer


def negative_exp(owner: nn.Module, name: str = "A_log") -> torch.Tensor:
    """-exp(owner.<name>) in float32 (an SSM's decay rates from their log), kept on `owner` until the
    parameter changes (a load, a fault injection): three kernels less per layer and step."""
    param = getattr(owner, name)
    if torch.compiler.is_compiling():  # (a compiled step cannot compare addresses; it fuses these)
        return -torch.exp(param.float())
    key = (param.data_ptr(), param._version)
    held = getattr(owner, f"_{name}_negative_exp", None)
    if held is None or held[0] != key:
        held = (key, -torch.exp(param.float()))
        setattr(owner, f"_{name}_negative_exp", held)
    return held[1]
