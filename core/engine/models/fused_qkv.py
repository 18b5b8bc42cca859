"""q, k and v as one GEMM: an attention module's three projections read as one [q + k + v, H] weight
(stacked once: fused_linears.py). On by default on accelerators (two launches less per attention
layer); the CPU keeps three products (its linears are packed per weight: cpu_linears.py); fp8
projections keep their own scales.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .fused_linears import can_stack, fusing, stacked


class FusedQKV:
    """Mixed into an attention module with q_proj, k_proj, v_proj and num_heads, num_kv_heads, head_dim."""

    fuse_qkv: bool | None = None  # None: on where the device is not the CPU; tests force it

    @property
    def _qkv(self) -> torch.Tensor | None:
        """The stacked weight once made (tests check that it was)."""
        held = getattr(self, "_qkv_held", None)
        return held[1] if held is not None else None

    def fuse_projections(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(q_proj(hidden), k_proj(hidden), v_proj(hidden)) of hidden [T, H], each [T, its width]: views of
        one product where fused (any widths: Qwen3-Next's q_proj also holds its output gate)."""
        parts = (self.q_proj, self.k_proj, self.v_proj)
        if fusing(self.fuse_qkv, hidden) and can_stack(parts):
            weight, bias = stacked(self, "qkv", parts)
            return F.linear(hidden, weight, bias).split([p.weight.shape[0] for p in parts], dim=-1)
        return tuple(p(hidden) for p in parts)

    def project_qkv(self, hidden: torch.Tensor):
        """(q [T, Hq, D], k [T, Hkv, D], v [T, Hkv, D]) of hidden [T, H]."""
        T = hidden.shape[0]
        q, k, v = self.fuse_projections(hidden)
        return (q.reshape(T, self.num_heads, self.head_dim), k.reshape(T, self.num_kv_heads, self.head_dim),
                v.reshape(T, self.num_kv_heads, self.head_dim))
