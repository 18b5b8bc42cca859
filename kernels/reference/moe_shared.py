"""A MoE layer's shared expert and routed experts: as per-assignment parts, left unsummed, or summed.

The fused GPU form (kernels/triton/fused_moe.py, `moe_experts_shared_unsummed`) runs the shared
expert as S extra "experts" of the routed experts' width next to each token's k routed ones, in the
same two launches: a shared expert of intermediate size S*I is exactly S experts of size I (its up
rows and its down columns cut in S slices), because the activation is elementwise and the down
projection sums over the intermediate axis. This is that computation in plain torch.
"""

from __future__ import annotations

import torch

from .mlp import mlp
from .moe_experts import moe_experts, per_assignment


def shared_slices(shared_up: torch.Tensor, shared_down: torch.Tensor, width: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(up [S, I, H], down [S, H, I]) views of a shared expert (up [S*I, H], down [H, S*I]) cut in S
    slices of `width` = I, or None when its size is not a multiple of I."""
    size, H = shared_up.shape
    if size % width or shared_down.shape != (H, size):
        return None
    S = size // width
    return shared_up.view(S, width, H), shared_down.view(H, S, width).permute(1, 0, 2)


def moe_experts_shared_unsummed(x, weights, ids, up, down, shared_up, shared_down, act="relu2"):
    """x [T, H]; weights/ids [T, k]; up [E, I, H], down [E, H, I]; shared_up [S*I, H], shared_down
    [H, S*I]. Returns (shared parts [T, S, H], routed parts [T, k, H]) in x's dtype: their sum over
    both part axes is the layer's output (shared expert + weighted routed experts)."""
    T, k = ids.shape
    sliced = shared_slices(shared_up, shared_down, up.shape[1])
    if sliced is None:
        raise ValueError(f"shared expert of size {shared_up.shape[0]} is not a multiple of the experts' {up.shape[1]}")
    su, sd = sliced
    shared = torch.stack([mlp(x, su[s], sd[s], None, act) for s in range(su.shape[0])], dim=1)
    # (the strategy the shapes pick: "sorted" on the CPU, where a prefill's thousands of assignments
    # would each copy an expert's weights in "gather")
    routed = per_assignment(x, ids, up, down, None, act).view(T, k, -1)
    routed = (routed.float() * weights[..., None].float()).to(x.dtype)
    return shared, routed


def moe_experts_shared(x, weights, ids, up, down, shared_up, shared_down, act="relu2"):
    """The layer's output [T, H]: the shared expert (shared_up [S, H], shared_down [H, S]) plus the
    routed experts' weighted sum, added in that order, as the model adds them."""
    return mlp(x, shared_up, shared_down, None, act) + moe_experts(x, weights, ids, up, down, None, act)
