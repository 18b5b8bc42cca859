"""Rotary embedding frequencies from a config: rope_parameters (transformers 5) or rope_theta +
rope_scaling (older configs). Supported: default, linear, llama3, yarn (gpt-oss)."""

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
    # Always computed on the CPU (callers move it): models are first built on the meta device, where
    # this arithmetic would import torch._dynamo (seconds) for a table finish_loading recomputes.
    inv = 1.0 / (float(p["rope_theta"]) ** (torch.arange(0, dim, 2, dtype=torch.int64, device="cpu").float() / dim))
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
    if kind == "yarn":
        return _yarn_inv_freq(p, inv, dim)
    raise ValueError(f"rope type {kind!r} is not supported by the embedded engine; supported: default, linear, llama3, yarn")


def _yarn_inv_freq(p: dict, inv: torch.Tensor, dim: int) -> torch.Tensor:
    """YaRN (Peng et al. 2023): high frequencies kept, low ones interpolated by `factor`, a linear
    ramp between the dims that turn beta_fast and beta_slow times over the original context."""
    factor, base = float(p["factor"]), float(p["rope_theta"])
    old_len = float(p["original_max_position_embeddings"])
    fast, slow = float(p.get("beta_fast") or 32), float(p.get("beta_slow") or 1)

    def dim_turning(rotations: float) -> float:
        return dim * math.log(old_len / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = dim_turning(fast), dim_turning(slow)
    if p.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(dim // 2, dtype=torch.float32, device="cpu") - low) / (high - low)).clamp(0, 1)
    keep = 1 - ramp  # 1: extrapolate (keep the frequency), 0: interpolate (divide by factor)
    return (inv / factor) * (1 - keep) + inv * keep


def attention_factor(cfg) -> float:
    """What the cos/sin tables are multiplied by: 1 except for YaRN (0.1 ln(factor) + 1 by default)."""
    p = rope_parameters(cfg)
    if p["rope_type"] != "yarn":
        return 1.0
    if p.get("attention_factor") is not None:
        return float(p["attention_factor"])
    factor = float(p["factor"])

    def mscale(scale: float, m: float = 1.0) -> float:
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    if p.get("mscale") and p.get("mscale_all_dim"):
        return mscale(factor, float(p["mscale"])) / mscale(factor, float(p["mscale_all_dim"]))
    return mscale(factor)
