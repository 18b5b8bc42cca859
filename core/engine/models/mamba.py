"""The Mamba (v1) mixer as Jamba builds it: in_proj to x and gate z, causal depthwise conv over x,
x_proj to a low-rank dt and B, C (each RMS-normed: Jamba's difference from plain Mamba), dt_proj, the
selective scan with a full [channels, d_state] A, y * silu(z), out_proj.

Its state lives in the state pool: per request a conv state [inner, conv_kernel - 1] and an SSM state
[inner, d_state]. Geometry (inner width, d_state, conv kernel, dt rank) comes from the layer map.
Requests are met as in mamba2.py (`_state_plan`): one-token continuations step their state in one
batched call; prompts and prompt chunks scan together in one varlen call.
"""

from __future__ import annotations

import torch
from torch import nn

from .base import RMSNormWeight, linear, negative_exp
from .mamba2 import _state_plan


class MambaMixer(nn.Module):
    def __init__(self, hidden_size: int, layer, ops, *, eps: float, proj_bias: bool, conv_bias: bool):
        super().__init__()
        g = layer.mamba
        self.layer_id, self.ops = layer.index, ops
        self.inner, self.d_state, self.kernel, self.dt_rank = g.inner, g.d_state, g.conv_kernel, g.dt_rank
        self.in_proj = linear(hidden_size, 2 * self.inner, proj_bias)
        self.conv1d = nn.Conv1d(self.inner, self.inner, self.kernel, groups=self.inner,
                                bias=conv_bias).requires_grad_(False)
        self.x_proj = linear(self.inner, self.dt_rank + 2 * self.d_state, False)
        self.dt_proj = linear(self.dt_rank, self.inner, True)
        self.A_log = nn.Parameter(torch.zeros(self.inner, self.d_state), requires_grad=False)
        self.D = nn.Parameter(torch.ones(self.inner), requires_grad=False)
        self.out_proj = linear(self.inner, hidden_size, proj_bias)
        self.dt_layernorm = RMSNormWeight(self.dt_rank, eps)
        self.b_layernorm = RMSNormWeight(self.d_state, eps)
        self.c_layernorm = RMSNormWeight(self.d_state, eps)

    @property
    def conv_shape(self) -> tuple[int, int]:
        return (self.inner, self.kernel - 1)

    @property
    def ssm_shape(self) -> tuple[int, int]:
        return (self.inner, self.d_state)

    def _ssm_inputs(self, xc: torch.Tensor):
        """Conv output -> (dt before its bias, B, C), with Jamba's norms."""
        ops = self.ops
        dt, B, C = self.x_proj(xc).split([self.dt_rank, self.d_state, self.d_state], dim=-1)
        dt = ops.rms_norm(dt, self.dt_layernorm.weight, self.dt_layernorm.eps)
        B = ops.rms_norm(B, self.b_layernorm.weight, self.b_layernorm.eps)
        C = ops.rms_norm(C, self.c_layernorm.weight, self.c_layernorm.eps)
        return torch.nn.functional.linear(dt, self.dt_proj.weight), B, C  # the bias goes in with the softplus

    def _step(self, x, z, A, w, b, conv_states, ssm_states, slots) -> torch.Tensor:
        ops = self.ops
        xc = ops.causal_conv1d_update_inplace(x, conv_states, slots, w, b, "silu")
        fused = getattr(ops, "implementations", {}).get("selective_state_update_lowrank_inplace", "reference")
        if fused != "reference":
            # A fast form norms dt, B, C and forms dt_proj's product inside the state update (one launch
            # for five); elsewhere (the CPU) they stay apart, as below.
            norms = (self.dt_layernorm.weight, self.b_layernorm.weight, self.c_layernorm.weight)
            return ops.selective_state_update_lowrank_inplace(
                ssm_states, slots, xc, self.x_proj(xc), self.dt_proj.weight, A, self.D, z, self.dt_proj.bias,
                True, norms, self.dt_layernorm.eps)
        dt, B, C = self._ssm_inputs(xc)
        return ops.selective_state_update_inplace(ssm_states, slots, xc, dt, A, B, C, self.D, z, self.dt_proj.bias, True)

    def forward(self, hidden: torch.Tensor, batch) -> torch.Tensor:
        ops = self.ops
        if batch.state_pool is None:
            raise RuntimeError(f"layer {self.layer_id} is a Mamba layer but the batch carries no state pool")
        conv_states = batch.state_pool.conv(self.layer_id)  # [slots, inner, K-1]
        ssm_states = batch.state_pool.ssm(self.layer_id)  # [slots, inner, d_state]
        x, z = self.in_proj(hidden).chunk(2, dim=-1)
        A = negative_exp(self)
        w, b = self.conv1d.weight[:, 0, :], self.conv1d.bias
        plan = _state_plan(batch, hidden.device)
        if plan.all_rows_step:
            y = self._step(x, z, A, w, b, conv_states, ssm_states, plan.step_slots)
        else:
            y = torch.empty(hidden.shape[0], self.inner, dtype=hidden.dtype, device=hidden.device)
        if plan.step_rows is not None:
            rows = plan.step_rows
            y[rows] = self._step(x[rows], z[rows], A, w, b, conv_states, ssm_states, plan.step_slots)
        if plan.scan_rows is not None:
            rows, slots, has = plan.scan_rows, plan.scan_slots, plan.scan_has_state
            conv0 = torch.where(has[:, None, None], conv_states[slots], 0)  # a new prompt starts from zeros
            ssm0 = torch.where(has[:, None, None], ssm_states[slots].float(), 0)
            xc, conv_final = ops.causal_conv1d_varlen(x[rows], plan.scan_starts, w, b, conv0, "silu")
            conv_states[slots] = conv_final.to(conv_states.dtype)
            dt, B, C = self._ssm_inputs(xc)
            ys, ssm_final = ops.selective_scan_varlen(xc, dt, A, B, C, plan.scan_starts, self.D, z[rows],
                                                      self.dt_proj.bias, ssm0, True)
            ssm_states[slots] = ssm_final.to(ssm_states.dtype)
            y[rows] = ys
        return self.out_proj(y.to(hidden.dtype))
