"""The gated short convolution (LFM2's conv blocks): in_proj to B, C, x; a causal depthwise conv
(no activation) over B * x; the output gated by C; out_proj. Its state is the conv window only:
per request [channels, K - 1] in the state pool, and no recurrent state (`ssm_shape` (0,): zero
elements, as the layer map's ssm_state_elems says).

Geometry (channels, conv kernel) comes from the layer map (`layer.short_conv`).
"""

from __future__ import annotations

import torch
from torch import nn

from .base import linear
from .mamba2 import _state_plan


class ShortConv(nn.Module):
    def __init__(self, hidden_size: int, layer, ops, *, bias: bool):
        super().__init__()
        self.layer_id, self.ops = layer.index, ops
        self.channels, self.kernel = layer.short_conv.channels, layer.short_conv.conv_kernel
        self.in_proj = linear(hidden_size, 3 * self.channels, bias)
        self.conv = nn.Conv1d(self.channels, self.channels, self.kernel, groups=self.channels,
                              bias=bias).requires_grad_(False)
        self.out_proj = linear(self.channels, hidden_size, bias)

    @property
    def conv_shape(self) -> tuple[int, int]:
        return (self.channels, self.kernel - 1)

    @property
    def ssm_shape(self) -> tuple[int]:
        return (0,)

    def forward(self, hidden: torch.Tensor, batch) -> torch.Tensor:
        ops = self.ops
        if batch.state_pool is None:
            raise RuntimeError(f"layer {self.layer_id} is a short-conv layer but the batch carries no state pool")
        conv_states = batch.state_pool.conv(self.layer_id)  # [slots, channels, K-1]
        bcx = self.in_proj(hidden)
        w, b = self.conv.weight[:, 0, :], self.conv.bias
        plan = _state_plan(batch, hidden.device)
        # Where a fast form exists, a decode step's B * x and C * y run inside the conv step (one launch
        # for three); elsewhere (the CPU's own conv op) the three stay apart.
        fused = getattr(ops, "implementations", {}).get("short_conv_update_inplace", "reference") != "reference"
        if fused and plan.all_rows_step:
            return self.out_proj(ops.short_conv_update_inplace(bcx, conv_states, plan.step_slots, w, b))
        B, C, x = bcx.chunk(3, dim=-1)
        bx = B * x
        y = torch.empty_like(bx)
        if plan.all_rows_step or plan.step_rows is not None:
            rows = slice(None) if plan.all_rows_step else plan.step_rows
            if fused:
                y[rows] = ops.short_conv_update_inplace(bcx[rows], conv_states, plan.step_slots, w, b)
            else:
                y[rows] = C[rows] * ops.causal_conv1d_update_inplace(bx[rows], conv_states, plan.step_slots, w, b, None)
        if plan.scan_rows is not None:
            rows, slots, has = plan.scan_rows, plan.scan_slots, plan.scan_has_state
            conv0 = torch.where(has[:, None, None], conv_states[slots], 0)  # a new prompt starts from zeros
            ys, final = ops.causal_conv1d_varlen(bx[rows], plan.scan_starts, w, b, conv0, None)
            conv_states[slots] = final.to(conv_states.dtype)
            y[rows] = C[rows] * ys
        return self.out_proj(y)
