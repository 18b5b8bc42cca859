"""The Mamba2 mixer (SSD): causal depthwise conv over x, B, C, then the selective state-space scan,
gated RMSNorm and the output projection. Its state lives in the state pool: per request one conv
state [conv_dim, conv_kernel - 1] and one SSM state [heads, head_dim, d_state].

Geometry (heads, head_dim, groups, d_state, conv kernel, the scan's chunk size) comes from the layer
map's entry for the layer (`layer.mamba2`), so the pools the planner sizes and the tensors this module
makes agree by construction. Behaviour is passed in by the family's builder, which knows its config
keys (NemotronH: use_bias, ...; Bamba/Granite-H spell them mamba_*).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from ..forward_batch import upload
from .base import RMSNormWeight, linear, negative_exp


def time_step_limit(cfg) -> tuple[float, float]:
    """dt clamp range: the config's time_step_limit (default (0, inf), i.e. none), applied in prefill
    and decode alike, as NVIDIA's Mamba2 code does. (transformers 5.24 instead floors dt at
    time_step_min in its prefill path only; with trained weights dt rarely goes below that floor.)"""
    limit = cfg.get("time_step_limit") or cfg.get("mamba_dt_limit") or (0.0, math.inf)
    lo, hi = (float(v) if not isinstance(v, dict) else float(v.get("__float__", "inf")) for v in limit)
    return lo, hi


@dataclass
class _StatePlan:
    """How a batch's requests meet their Mamba state, worked out once per batch for all layers:
    requests continuing with one token step their state in one batched call; the rest (prompts and
    prompt chunks) run the chunked scan together in one varlen call. Row and slot indices go to the
    device in one copy per batch; a decode-only batch needs none (every row steps, in order)."""

    step_rows: torch.Tensor | None  # token index of each stepping request (None with all_rows_step)
    step_slots: torch.Tensor | None  # None: no request steps
    scan_rows: torch.Tensor | None  # token indices of the scanning requests, back to back
    scan_starts: list[int]  # offsets of each scanning request within scan_rows (n + 1)
    scan_slots: torch.Tensor | None
    scan_has_state: torch.Tensor | None  # [n] bool: the slot holds this request's state
    all_rows_step: bool = False  # every token is a stepping request's, in batch order: no gather needed


def _state_plan(batch, device) -> _StatePlan:
    plan = batch.memo.get("mamba_state_plan")
    if plan is not None:
        return plan
    if batch.is_pure_decode:  # the batch's own state_slots, rows 0..B-1 (no per-request list read)
        plan = _StatePlan(step_rows=None, step_slots=batch.state_slots, scan_rows=None,
                          scan_starts=[0], scan_slots=None, scan_has_state=None, all_rows_step=True)
        batch.memo["mamba_state_plan"] = plan
        return plan
    starts = batch.query_start_loc
    steps, scans = [], []
    for i, (q, has) in enumerate(zip(batch.query_lens_list, batch.has_initial_state_list)):
        (steps if q == 1 and has else scans).append(i)
    slots = batch.state_slots_list
    scan_rows, scan_starts = [], [0]
    for i in scans:
        scan_rows.extend(range(starts[i], starts[i + 1]))
        scan_starts.append(len(scan_rows))
    step_rows, step_slots, scan_rows_d, scan_slots, scan_has = upload(
        [[starts[i] for i in steps], [slots[i] for i in steps], scan_rows, [slots[i] for i in scans],
         [int(batch.has_initial_state_list[i]) for i in scans]], torch.device(device))
    plan = _StatePlan(
        step_rows=step_rows if steps else None,
        step_slots=step_slots if steps else None,
        scan_rows=scan_rows_d,
        scan_starts=scan_starts,
        scan_slots=scan_slots,
        scan_has_state=scan_has.bool(),
    )
    batch.memo["mamba_state_plan"] = plan
    return plan


class Mamba2Mixer(nn.Module):
    # How the SSM output meets the gate z: "norm_gated" y = norm(y * silu(z)) (NemotronH, Bamba,
    # Granite, Zamba2); "gated_norm" y = norm(y) * silu(z); "gate" y * silu(z) with no norm (Falcon-H1
    # without mamba_rms_norm). The norm is group-wise over `norm_groups` groups.
    GATES = ("norm_gated", "gated_norm", "gate")

    def __init__(self, hidden_size: int, layer, ops, *, eps: float, dt_limit: tuple[float, float],
                 proj_bias: bool, conv_bias: bool, out_bias: bool | None = None, gate: str = "norm_gated",
                 norm_groups: int | None = None):
        super().__init__()
        g = layer.mamba2
        self.layer_id, self.ops = layer.index, ops
        self.num_heads, self.head_dim, self.n_groups = g.heads, g.head_dim, g.groups
        self.d_state, self.kernel, self.chunk_size = g.d_state, g.conv_kernel, g.chunk_size
        self.intermediate, self.conv_dim = g.intermediate, g.conv_dim
        self.eps = float(eps)
        self.dt_limit = dt_limit
        self.in_proj = linear(hidden_size, self.intermediate + self.conv_dim + self.num_heads, proj_bias)
        self.conv1d = nn.Conv1d(self.conv_dim, self.conv_dim, self.kernel, groups=self.conv_dim,
                                bias=conv_bias).requires_grad_(False)
        self.dt_bias = nn.Parameter(torch.zeros(self.num_heads), requires_grad=False)
        self.A_log = nn.Parameter(torch.zeros(self.num_heads), requires_grad=False)
        self.D = nn.Parameter(torch.ones(self.num_heads), requires_grad=False)
        if gate not in self.GATES:
            raise ValueError(f"Mamba2 gate {gate!r}: expected one of {self.GATES}")
        self.gate = gate
        self.norm_group_size = self.intermediate // int(norm_groups or self.n_groups)
        if gate != "gate":
            self.norm = RMSNormWeight(self.intermediate, self.eps)
        self.out_proj = linear(self.intermediate, hidden_size, proj_bias if out_bias is None else out_bias)

    @property
    def conv_shape(self) -> tuple[int, int]:
        return (self.conv_dim, self.kernel - 1)

    @property
    def ssm_shape(self) -> tuple[int, int, int]:
        return (self.num_heads, self.head_dim, self.d_state)

    def _split_xbc(self, xbc: torch.Tensor):
        gn = self.n_groups * self.d_state
        x, B, C = xbc.split([self.intermediate, gn, gn], dim=-1)
        n = xbc.shape[0]
        return (x.reshape(n, self.num_heads, self.head_dim), B.reshape(n, self.n_groups, self.d_state),
                C.reshape(n, self.n_groups, self.d_state))

    def _step(self, xbc, dt, A, w, b, conv_states, ssm_states, slots) -> torch.Tensor:
        """One token per request: conv and SSM states of `slots` read and updated in the pools."""
        xc = self.ops.causal_conv1d_update_inplace(xbc, conv_states, slots, w, b, "silu")
        xs, Bs, Cs = self._split_xbc(xc)
        return self.ops.mamba_state_update_inplace(ssm_states, slots, xs, dt, A, Bs, Cs, self.D, self.dt_bias,
                                                   True, self.dt_limit)

    def _A(self) -> torch.Tensor:
        return negative_exp(self)

    def forward(self, hidden: torch.Tensor, batch) -> torch.Tensor:
        ops = self.ops
        if batch.state_pool is None:
            raise RuntimeError(f"layer {self.layer_id} is a Mamba2 layer but the batch carries no state pool")
        conv_states = batch.state_pool.conv(self.layer_id)  # [slots, conv_dim, K-1]
        ssm_states = batch.state_pool.ssm(self.layer_id)  # [slots, H, P, N]
        z, xbc, dt = self.in_proj(hidden).split([self.intermediate, self.conv_dim, self.num_heads], dim=-1)
        A = self._A()
        w, b = self.conv1d.weight[:, 0, :], self.conv1d.bias
        plan = _state_plan(batch, hidden.device)
        if plan.all_rows_step:  # decode only: no gather of rows, the states updated where they lie
            y = self._step(xbc, dt, A, w, b, conv_states, ssm_states, plan.step_slots)
        else:
            y = torch.empty(hidden.shape[0], self.num_heads, self.head_dim, dtype=hidden.dtype, device=hidden.device)
        if plan.step_rows is not None:
            rows = plan.step_rows
            y[rows] = self._step(xbc[rows], dt[rows], A, w, b, conv_states, ssm_states, plan.step_slots)
        if plan.scan_rows is not None:
            rows, slots, has = plan.scan_rows, plan.scan_slots, plan.scan_has_state
            every = plan.step_rows is None  # all tokens scan, in order: no gather, no scatter
            xbc_s, dt_s = (xbc, dt) if every else (xbc[rows], dt[rows])
            # A request starting its prompt begins from zeros whatever its slot holds.
            xc = ops.causal_conv1d_varlen_inplace(xbc_s, plan.scan_starts, w, b, conv_states, slots, has, "silu")
            ssm0 = torch.where(has[:, None, None, None], ssm_states[slots].float(), 0)
            xs, Bs, Cs = self._split_xbc(xc)
            ys, ssm_final = ops.mamba_chunk_scan_varlen(xs, dt_s, A, Bs, Cs, plan.scan_starts, self.chunk_size,
                                                        self.D, self.dt_bias, ssm0, True, self.dt_limit)
            ssm_states[slots] = ssm_final.to(ssm_states.dtype)
            if every:
                y = ys
            else:
                y[rows] = ys
        y = y.reshape(hidden.shape[0], self.intermediate)
        if self.gate == "gate":
            y = y * torch.nn.functional.silu(z)
        else:
            y = ops.gated_rms_norm(y, z, self.norm.weight, self.eps, self.norm_group_size,
                                   norm_before_gate=self.gate == "gated_norm")
        return self.out_proj(y.to(hidden.dtype))
