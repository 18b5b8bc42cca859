"""The model's layers as vLLM's block-size alignment sees them, without building the model.

A real start aligns the KV cache block once the model is loaded (uniproc_executor.py:75,
multiproc_executor.py:802: `current_platform.update_block_size_for_backend(vllm_config)`), reading each
layer from `compilation_config.static_forward_context` (config/vllm.py:3640-3661) and asking it for its
attention backend. Loading the model is beyond the oracle (weights, CUDA), so this fills that table with
one instance of each kind of layer, of vLLM's own classes with their constructors skipped, and sets on
each what its constructor would have set, from the same vLLM functions the constructor calls:

- attention: `Attention.get_attn_backend()` returns `self.attn_backend` (attention.py:608-609), which
  the constructor takes from the selector (attention.py:350-360, v1/attention/selector.py:109
  get_attn_backend) with the layer's head size, the default dtype (the model's, during model init:
  attention.py:347-348), the cache dtype, sinks and sliding window;
- state layers: the Mamba-like class the model's module uses (a MambaBase subclass imported there); its
  backend comes from its `mamba_type` (abstract.py:93-95). The GDN layer's prefill-checkpoint alignment
  is what its constructor derives from vLLM's GDN prefill backend (qwen_gdn_linear_attn.py:686-696).

Then vLLM's own `update_block_size_for_backend` runs: the platform's (XPU and CPU override it) and the
hybrid alignment in it (platforms/interface.py:750-795, :940-1130). What is stood in, and so not the
engine's own reading: which layers exist (one per kind), and the attention layer's sinks (SINKS) and
sliding window (the config's layer_types). MLA layers: the selector is asked with use_mla and the
model's MLA head size, as MLAAttention does; Kimi-Linear's own MLA class (models/kimi_k3) is not built.
"""

from __future__ import annotations

import inspect
import sys

# Architectures whose attention layers all carry sinks (gpt_oss.py:131, :186 `sinks=self.sinks`).
SINKS = {"GptOssForCausalLM": "vllm/model_executor/models/gpt_oss.py:131,186"}


# Models whose module imports more than one Mamba-like class, and the config switch that picks one:
# Kimi-Linear's KDA layers are KimiGatedDeltaNetAttention unless linear_attn_config.use_full_rank_gate
# (Kimi-K3) asks for KimiK3DeltaAttention (models/kimi_k3/nvidia/model.py:715-735, amd/linear.py:548-564).
CHOSEN_BY_CONFIG = {
    "KimiLinearForCausalLM": lambda hf: ("KimiK3DeltaAttention"
                                         if (getattr(hf, "linear_attn_config", None) or {}).get("use_full_rank_gate")
                                         else "KimiGatedDeltaNetAttention"),
}


class AlignmentLimit(Exception):
    """The alignment could not be reproduced for this model; the message says why."""


def _bare(cls, **attrs):
    """An instance of vLLM's own layer class without running its constructor (which builds weights)."""
    obj = object.__new__(cls)
    for name, value in attrs.items():
        object.__setattr__(obj, name, value)
    return obj


def _state_class(model_cls, hf_config):
    """The Mamba-like layer class the model's module imports (one, or the one its config picks, or the
    alignment is not reproduced)."""
    from vllm.model_executor.layers.mamba.abstract import MambaBase

    found = set()
    for name in {model_cls.__module__, *(c.__module__ for c in model_cls.__mro__)}:
        module = sys.modules.get(name)
        for value in vars(module).values() if module else ():
            if inspect.isclass(value) and issubclass(value, MambaBase) and not inspect.isabstract(value):
                found.add(value)
    choose = CHOSEN_BY_CONFIG.get(model_cls.__name__)
    if choose is not None:
        found = {c for c in found if c.__name__ == choose(hf_config)}
    if len(found) != 1:
        names = ", ".join(sorted(c.__qualname__ for c in found)) or "none"
        raise AlignmentLimit(f"state layer class of {model_cls.__name__} not identified (MambaBase classes in its "
                             f"module: {names})")
    return found.pop()


def _attention_layers(cfg) -> dict:
    import torch
    from vllm.config.vllm import set_current_vllm_config
    from vllm.model_executor.layers.attention.attention import Attention
    from vllm.v1.attention.selector import get_attn_backend

    model, cache = cfg.model_config, cfg.cache_config
    kinds = getattr(model.hf_text_config, "layer_types", None) or []
    sliding = {True, False} if "sliding_attention" in kinds and "full_attention" in kinds else {
        "sliding_attention" in kinds or model.get_sliding_window() is not None}
    out = {}
    previous = torch.get_default_dtype()
    torch.set_default_dtype(model.dtype)  # as during model init (attention.py:347-348)
    try:
        with set_current_vllm_config(cfg):
            for window in sorted(sliding):
                backend = get_attn_backend(model.get_head_size(), model.dtype, cache.cache_dtype, use_mla=model.use_mla,
                                           has_sink=model.architecture in SINKS, has_sliding_window=window)
                out[f"oracle.attention.{'sliding' if window else 'full'}"] = _bare(Attention, attn_backend=backend)
    finally:
        torch.set_default_dtype(previous)
    return out


def _state_layer(cfg):
    from vllm.config.vllm import set_current_vllm_config
    from vllm.model_executor.layers.mamba.abstract import MambaBase
    from vllm.model_executor.models import ModelRegistry

    model_cls, _ = ModelRegistry.resolve_model_cls(cfg.model_config.architecture, model_config=cfg.model_config)
    cls = _state_class(model_cls, cfg.model_config.hf_text_config)
    attrs = {}
    if cls.get_prefill_checkpoint_alignment is not MambaBase.get_prefill_checkpoint_alignment:
        from vllm.model_executor.layers.mamba.gdn import qwen_gdn_linear_attn as gdn

        if not issubclass(cls, gdn.QwenGatedDeltaNetAttention):
            raise AlignmentLimit(f"{cls.__qualname__}'s prefill-checkpoint alignment is set in its constructor, "
                                 "which the oracle does not replay")
        with set_current_vllm_config(cfg):
            _asked, active = gdn._resolve_gdn_prefill_backend(cfg)
        flashinfer = cfg.cache_config.mamba_cache_mode == "align" and active == "flashinfer"
        attrs["_checkpoint_alignment"] = gdn.FLASHINFER_GDN_CHECKPOINT_ALIGNMENT if flashinfer else None
        attrs["gdn_prefill_backend"] = active
    return _bare(cls, **attrs), attrs.get("gdn_prefill_backend")


def align(cfg) -> dict:
    """Run vLLM's block-size alignment on `cfg` as a real start would after loading the model; returns what
    the stand-in layers were (the attention backends, the state layer class, the GDN prefill backend)."""
    from vllm.platforms import current_platform

    layers = _attention_layers(cfg)
    info = {"attention_backends": sorted({l.attn_backend.get_name() for l in layers.values()})}
    if cfg.model_config.is_hybrid:
        layer, gdn = _state_layer(cfg)
        layers["oracle.state"] = layer
        info["state_layer"] = type(layer).__name__
        if gdn:
            info["gdn_prefill_backend"] = gdn
    context = cfg.compilation_config.static_forward_context
    context.update(layers)
    try:
        current_platform.update_block_size_for_backend(cfg)
    finally:
        for name in layers:
            context.pop(name, None)
    return info
