"""Rotary embedding frequencies from a config: rope_parameters (transformers 5) or rope_theta +
rope_scaling (older configs). Supported: default, linear, llama3."""

from __future__ import annotations

import math

import torch


def rope_parameters(cfg) -> dict:
    params = dict(cfg.get("rope_parameters") or {})
    scaling = cfg.get("rope_scaling") or {}
    params = {**scaling, **params}
    params.setdefault("rope_theta", cfg.get("rope_theta", 10000.0))
    params["rope_type"] = params.get("rope_type") or params.get("type") or "default"
    return params


def inv_freq_for(cfg, head_dim: int) -> torch.Tensor:
    p = rope_parameters(cfg)
    kind = p["rope_type"]
    dim = int(head_dim * p.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 1.0)))
    inv = 1.0 / (float(p["rope_theta"]) ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    if kind == "default":
        return inv
    if kind == "linear":
        return inv / float(p["factor"])
    if kind == "llama3":
        factor, low, high = float(p["factor"]), float(p["low_freq_factor"]), float(p["high_freq_factor"])
        old_len = float(p["original_max_position_embeddings"])
        wavelen = 2 * math.pi / inv
        scaled = torch.where(wavelen > old_len / low, inv / factor, inv)  # long wavelengths: slowed down
        smooth = (old_len / wavelen - low) / (high - low)
        blended = (1 - smooth) * scaled / factor + smooth * scaled
        medium = (wavelen >= old_len / high) & (wavelen <= old_len / low)
        return torch.where(medium, blended, scaled)
    raise ValueError(f"rope type {kind!r} is not supported by the embedded engine; supported: default, linear, llama3")
