"""The gates of a delta-rule layer from its projections: beta = sigmoid(b) and the log decay
g = -exp(A_log) * softplus(a + dt_bias) (<= 0, float32).

Gated DeltaNet (Qwen3-Next): a, b [T, H], A_log and dt_bias [H], beta in b's dtype.
KDA (Kimi-Linear): a [T, H, D] (f_b_proj's output, a decay per key channel), dt_bias [H * D],
A_log with H elements (the checkpoint's [1, 1, H, 1]: one rate per head, over its D channels),
b [T, H], beta in float32.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def delta_rule_gates(a, b, A_log, dt_bias, beta_dtype=None):
    """a [T, H] or [T, H, D], b [T, H], A_log (H elements), dt_bias (H * D elements).
    Returns (g shaped as a, float32; beta [T, H] in beta_dtype, b's dtype when None)."""
    T, H = b.shape
    rate = A_log.float().exp().reshape(H, *([1] * (a.dim() - 2)))  # [H] or [H, 1]
    g = -rate * F.softplus(a.float() + dt_bias.float().reshape(a.shape[1:]))
    beta_dtype = b.dtype if beta_dtype is None else beta_dtype
    # (sigmoid in b's dtype when beta keeps it, as `b.sigmoid()`; else in float32 first)
    beta = b.sigmoid() if beta_dtype == b.dtype else b.float().sigmoid().to(beta_dtype)
    return g, beta
