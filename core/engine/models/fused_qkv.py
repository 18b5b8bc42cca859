"""q, k and v as one GEMM: an attention module's three projections read as one [q + k + v, H] weight.

On first use the three weights (and biases) are concatenated once and each projection's parameter is
re-pointed at its slice of the result, so the model holds the weights once, the checkpoint's names and
shapes stay, and a later in-place copy into a projection (a reload, a fault injection) lands in the
fused weight. A projection whose storage was replaced since (its address moved) is fused again.
On by default on accelerators (two launches less per attention layer); the CPU keeps three products
(its linears are packed per weight: cpu_linears.py); fp8 projections keep their own scales.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from bringup.core.engine.quantized import is_quantized


class FusedQKV:
    """Mixed into an attention module with q_proj, k_proj, v_proj and num_heads, num_kv_heads, head_dim."""

    fuse_qkv: bool | None = None  # None: on where the device is not the CPU; tests force it

    def _fused_qkv(self):
        parts = (self.q_proj, self.k_proj, self.v_proj)
        key = tuple(p.weight.data_ptr() for p in parts)
        if getattr(self, "_qkv_key", None) != key:
            weight = torch.cat([p.weight.detach() for p in parts])
            biases = [p.bias for p in parts]
            bias = torch.cat([b.detach() for b in biases]) if all(b is not None for b in biases) else None
            start = 0
            for p in parts:
                n = p.weight.shape[0]
                p.weight.data = weight[start:start + n]
                if bias is not None:
                    p.bias.data = bias[start:start + n]
                start += n
            self._qkv, self._qkv_bias = weight, bias
            self._qkv_key = tuple(p.weight.data_ptr() for p in parts)
        return self._qkv, self._qkv_bias

    def project_qkv(self, hidden: torch.Tensor):
        """(q [T, Hq, D], k [T, Hkv, D], v [T, Hkv, D]) of hidden [T, H]."""
        T = hidden.shape[0]
        fuse = self.fuse_qkv if self.fuse_qkv is not None else hidden.device.type != "cpu"
        parts = (self.q_proj, self.k_proj, self.v_proj)
        mixed_bias = len({p.bias is None for p in parts}) > 1
        if fuse and not mixed_bias and not any(is_quantized(p) for p in parts):
            nq, nkv = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
            weight, bias = self._fused_qkv()
            q, k, v = F.linear(hidden, weight, bias).split([nq, nkv, nkv], dim=-1)
        else:
            q, k, v = (p(hidden) for p in parts)
        return (q.reshape(T, self.num_heads, self.head_dim), k.reshape(T, self.num_kv_heads, self.head_dim),
                v.reshape(T, self.num_kv_heads, self.head_dim))
