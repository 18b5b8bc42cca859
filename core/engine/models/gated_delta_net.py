"""The gated DeltaNet mixer (Qwen3-Next, Qwen3.5): a causal depthwise conv over q, k, v, then the
gated delta rule (kernels/reference/gated_delta_rule.py), a per-head gated RMSNorm and the output
projection. Its state lives in the state pool: per request one conv window [conv_dim, K - 1] and
one recurrent state [value_heads, key_head_dim, value_head_dim] (float32 by default).

Geometry comes from the layer map (`layer.gated_delta_net`: key and value heads, their head dims,
conv kernel), so the pools the planner sizes and the tensors made here agree by construction.
Checkpoints spell the input projection two ways: Qwen3-Next fuses q, k, v, z (`in_proj_qkvz`) and
b, a (`in_proj_ba`) grouped per key head; Qwen3.5 keeps four plain projections.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .base import RMSNormWeight, linear
from .fused_linears import can_stack, fusing, stacked
from .fused_qkv import FusedQKV
from .mamba2 import _state_plan


class GatedDeltaNet(nn.Module):
    def __init__(self, hidden_size: int, layer, ops, *, eps: float, fused_projections: bool):
        super().__init__()
        g = layer.gated_delta_net
        self.layer_id, self.ops = layer.index, ops
        self.nk, self.nv, self.dk, self.dv, self.kernel = (g.key_heads, g.value_heads, g.key_head_dim,
                                                          g.value_head_dim, g.conv_kernel)
        self.key_dim, self.value_dim, self.conv_dim = g.key_dim, g.value_dim, g.conv_dim
        self.fused = fused_projections
        if fused_projections:
            self.in_proj_qkvz = linear(hidden_size, 2 * self.key_dim + 2 * self.value_dim, False)
            self.in_proj_ba = linear(hidden_size, 2 * self.nv, False)
        else:
            self.in_proj_qkv = linear(hidden_size, self.conv_dim, False)
            self.in_proj_z = linear(hidden_size, self.value_dim, False)
            self.in_proj_b = linear(hidden_size, self.nv, False)
            self.in_proj_a = linear(hidden_size, self.nv, False)
        self.conv1d = nn.Conv1d(self.conv_dim, self.conv_dim, self.kernel, groups=self.conv_dim,
                                bias=False).requires_grad_(False)
        self.dt_bias = nn.Parameter(torch.ones(self.nv), requires_grad=False)
        self.A_log = nn.Parameter(torch.zeros(self.nv), requires_grad=False)
        self.norm = RMSNormWeight(self.dv, eps)
        self.out_proj = linear(self.value_dim, hidden_size, False)

    @property
    def conv_shape(self) -> tuple[int, int]:
        return (self.conv_dim, self.kernel - 1)

    @property
    def ssm_shape(self) -> tuple[int, int, int]:
        return (self.nv, self.dk, self.dv)

    def _products(self, hidden: torch.Tensor):
        """Each input projection of hidden, in the order they are declared: views of one GEMM over their
        stacked weights on accelerators (as fused_qkv.py stacks q/k/v; the checkpoint's names and shapes stay)."""
        parts = ((self.in_proj_qkvz, self.in_proj_ba) if self.fused else
                 (self.in_proj_qkv, self.in_proj_z, self.in_proj_b, self.in_proj_a))
        if fusing(FusedQKV.fuse_qkv, hidden) and can_stack(parts):
            weight, bias = stacked(self, "in_proj", parts)
            return F.linear(hidden, weight, bias).split([p.weight.shape[0] for p in parts], dim=-1)
        return tuple(p(hidden) for p in parts)

    def _project(self, hidden: torch.Tensor):
        """-> (mixed q|k|v [T, conv_dim], z [T, Hv, dv], b [T, Hv], a [T, Hv])."""
        T = hidden.shape[0]
        if not self.fused:
            mixed, z, b, a = self._products(hidden)
            return mixed, z.reshape(T, self.nv, self.dv), b, a
        r = self.nv // self.nk  # value heads per key head: the fused rows are grouped per key head
        qkvz, ba = self._products(hidden)
        q, k, v, z = qkvz.view(T, self.nk, 2 * self.dk + 2 * r * self.dv).split(
            [self.dk, self.dk, r * self.dv, r * self.dv], dim=-1)
        b, a = ba.view(T, self.nk, 2 * r).split([r, r], dim=-1)
        mixed = torch.cat([q.reshape(T, -1), k.reshape(T, -1), v.reshape(T, -1)], dim=-1)
        return mixed, z.reshape(T, self.nv, self.dv), b.reshape(T, self.nv), a.reshape(T, self.nv)

    def _split(self, mixed: torch.Tensor):
        n = mixed.shape[0]
        q, k, v = mixed.split([self.key_dim, self.key_dim, self.value_dim], dim=-1)
        return q.reshape(n, self.nk, self.dk), k.reshape(n, self.nk, self.dk), v.reshape(n, self.nv, self.dv)

    def forward(self, hidden: torch.Tensor, batch) -> torch.Tensor:
        ops, T = self.ops, hidden.shape[0]
        if batch.state_pool is None:
            raise RuntimeError(f"layer {self.layer_id} is a gated DeltaNet layer but the batch carries no state pool")
        conv_states = batch.state_pool.conv(self.layer_id)  # [slots, conv_dim, K-1]
        rec_states = batch.state_pool.ssm(self.layer_id)  # [slots, Hv, dk, dv]
        mixed, z, b, a = self._project(hidden)
        # beta = sigmoid(b) in b's dtype, g = -exp(A_log) * softplus(a + dt_bias) float32 (log decay <= 0)
        g, beta = ops.delta_rule_gates(a, b, self.A_log, self.dt_bias, b.dtype)
        w = self.conv1d.weight[:, 0, :]
        y = torch.empty(T, self.nv, self.dv, dtype=hidden.dtype, device=hidden.device)
        run_delta_rule(batch, mixed, w, g, beta, conv_states, rec_states, self._split, y,
                       ops.causal_conv1d_update_inplace, ops.causal_conv1d_varlen_inplace,
                       ops.gated_delta_rule_recurrent_inplace, ops.gated_delta_rule_chunk)
        # RMSNorm over each head's dv channels, then the silu(z) gate (norm before gate).
        out = ops.gated_rms_norm(y.reshape(T * self.nv, self.dv), z.reshape(T * self.nv, self.dv), self.norm.weight,
                                 self.norm.eps, self.dv, norm_before_gate=True)
        return self.out_proj(out.reshape(T, self.value_dim).to(hidden.dtype))


def run_delta_rule(batch, mixed, w, g, beta, conv_states, rec_states, split, y, conv_step, conv_varlen, step, chunk):
    """The short conv and a delta rule over the batch's rows, writing y [T, H, dv] (gated DeltaNet and KDA
    share it; they differ in the decay's shape and the two rule ops). One-token requests step their state
    slots in place; prompts and prompt chunks go through one varlen conv and one chunked call."""
    plan = _state_plan(batch, mixed.device)
    if plan.all_rows_step or plan.step_rows is not None:
        rows = slice(None) if plan.all_rows_step else plan.step_rows
        q, k, v = split(conv_step(mixed[rows], conv_states, plan.step_slots, w, None, "silu"))
        y[rows] = step(q, k, v, g[rows], beta[rows], rec_states, plan.step_slots)
    if plan.scan_rows is not None:
        rows, slots, has = plan.scan_rows, plan.scan_slots, plan.scan_has_state
        # A request starting its prompt begins from zeros whatever its slot holds.
        xc = conv_varlen(mixed[rows], plan.scan_starts, w, None, conv_states, slots, has, "silu")
        rec0 = torch.where(has[:, None, None, None], rec_states[slots].float(), 0)
        q, k, v = split(xc)
        ys, rec_final = chunk(q, k, v, g[rows], beta[rows], plan.scan_starts, rec0)
        rec_states[slots] = rec_final.to(rec_states.dtype)
        y[rows] = ys
