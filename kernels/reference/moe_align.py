"""Sorting a MoE batch's (token, expert) assignments into per-expert blocks for a grouped GEMM.

The T*k assignments (flat index a = token * k + slot) are ordered by expert; each expert's run is
padded up to a multiple of `block` rows, so every block of `block` rows belongs to one expert.
Padding rows hold the index T*k (one past the last assignment), which the GEMM skips. Shapes
depend only on T, k, E and `block` (never on the routing), so the step needs no read back to the
host and can be captured in a graph: the padded length is the bound T*k + min(E, T*k) * (block - 1)
(at most min(E, T*k) experts are hit, each wasting at most block - 1 rows).
"""

from __future__ import annotations

import torch


def padded_rows(num_assignments: int, num_experts: int, block: int) -> int:
    bound = num_assignments + min(num_experts, num_assignments) * (block - 1)
    return (bound + block - 1) // block * block


def moe_align(ids: torch.Tensor, num_experts: int, block: int):
    """ids [T, k] expert of each assignment. Returns
    sorted_ids [R] int32: assignment index per row (T*k on padding rows), R = padded_rows(...),
    block_expert [R / block] int32: the expert of each block (-1 for blocks past the end),
    rows_used [1] int32: rows up to the end of the last expert's padded run."""
    n = ids.numel()
    flat = ids.reshape(-1).long()
    R = padded_rows(n, num_experts, block)
    # scatter_add, not bincount: bincount reads the largest id back to the host on a GPU
    counts = torch.zeros(num_experts, dtype=torch.long, device=ids.device).scatter_add_(0, flat, torch.ones_like(flat))
    padded = (counts + block - 1) // block * block
    ends = padded.cumsum(0)
    starts = ends - padded
    order = flat.argsort(stable=True)  # assignments grouped by expert, in assignment order
    first_of_expert = counts.cumsum(0) - counts  # where each expert's run starts in `order`
    rank = torch.arange(n, device=ids.device) - first_of_expert[flat[order]]
    sorted_ids = torch.full((R,), n, dtype=torch.int32, device=ids.device)
    sorted_ids[starts[flat[order]] + rank] = order.to(torch.int32)
    block_starts = torch.arange(0, R, block, device=ids.device)
    expert_of_block = torch.searchsorted(ends, block_starts, right=True)
    block_expert = torch.where(expert_of_block < num_experts, expert_of_block, -1).to(torch.int32)
    return sorted_ids, block_expert, ends[-1:].to(torch.int32)
