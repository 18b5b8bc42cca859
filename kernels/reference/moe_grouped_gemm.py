"""One grouped GEMM of a fused MoE: each block of sorted assignment rows times its expert's matrix.

Row r of the output (in sorted order) is act(x[token(r)] @ w[e]^T) * scale, where the row's
assignment a = sorted_ids[r] (padding rows: a = T*k, skipped), token(r) = a // k when the input
holds one row per token (`rows_per_token = k`) or a when it holds one row per assignment
(`rows_per_token = 1`), e = block_expert[r // block], and scale is the routing weight of a when
`weights` is given. The result goes to out[a] (assignment order), so the caller sums over k.
"""

from __future__ import annotations

import torch

from .mlp import activation


def moe_grouped_gemm(x: torch.Tensor, w: torch.Tensor, sorted_ids: torch.Tensor, block_expert: torch.Tensor,
                     block: int, num_assignments: int, rows_per_token: int, act: str | None = None,
                     weights: torch.Tensor | None = None, out: torch.Tensor | None = None,
                     bias: torch.Tensor | None = None) -> torch.Tensor:
    """x [T or T*k, K]; w [E, N, K]; bias [E, N] or None (added before the activation); returns
    out [T*k, N] in x's dtype (float32 accumulation)."""
    N = w.shape[1]
    if out is None:
        out = torch.zeros(num_assignments, N, dtype=x.dtype, device=x.device)
    ids = sorted_ids.long()
    valid = ids < num_assignments
    rows = torch.arange(ids.numel(), device=x.device)[valid]
    a = ids[valid]
    e = block_expert.long()[rows // block]
    acc = torch.promote_types(x.dtype, torch.float32)  # float32 accumulation (float64 stays float64)
    xin = x[a // rows_per_token].to(acc)
    y = torch.bmm(xin[:, None, :], w[e].to(acc).transpose(1, 2))[:, 0, :]
    if bias is not None:
        y = y + bias[e].to(acc)
    if act is not None:
        y = activation(act, y)
    if weights is not None:
        y = y * weights.reshape(-1)[a].to(acc)[:, None]
    out[a] = y.to(out.dtype)
    return out
