"""The Kimi Delta Attention mixer (Kimi-Linear): separate causal depthwise convs over q, k and v
(silu), then KDA, the gated delta rule with a decay per key channel (kernels/reference/kda.py),
a per-head RMSNorm gated by sigmoid(g_b(g_a(x))), and the output projection.

Its state lives in the state pool: per request one conv window over q|k|v [3 * heads * head_dim,
K - 1] and one recurrent state [heads, head_dim, head_dim] (float32 by default). Geometry comes from
the layer map (`layer.kda`: heads, head dim, conv kernel), so the pools the planner sizes
and the tensors made here agree by construction. Weight names are the checkpoint's (Moonshot's
modeling code, which transformers writes back on save): q_conv1d / k_conv1d / v_conv1d, f_a_proj /
f_b_proj / dt_bias / A_log for the forget gate, b_proj for beta, g_a_proj / g_b_proj / o_norm.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .base import RMSNormWeight, linear
from .fused_linears import can_stack, fusing, stacked
from .fused_qkv import FusedQKV
from .gated_delta_net import run_delta_rule


def _conv(width: int, kernel: int) -> nn.Conv1d:
    return nn.Conv1d(width, width, kernel, groups=width, bias=False).requires_grad_(False)


class KimiDeltaAttention(nn.Module):
    """q/k/v, the output gate's and the decay's first projections and beta's as one product on accelerators
    (as fused_qkv.py stacks q/k/v); the three convs' weights held stacked."""

    def __init__(self, hidden_size: int, layer, ops, *, eps: float):
        super().__init__()
        g = layer.kda
        self.layer_id, self.ops = layer.index, ops
        self.heads, self.head_dim, self.kernel, self.width = g.heads, g.head_dim, g.conv_kernel, g.width
        H, D, W = self.heads, self.head_dim, self.width
        self.q_proj, self.k_proj, self.v_proj = (linear(hidden_size, W, False) for _ in range(3))
        self.q_conv1d, self.k_conv1d, self.v_conv1d = (_conv(W, self.kernel) for _ in range(3))
        self.f_a_proj = linear(hidden_size, D, False)
        self.f_b_proj = linear(D, W, False)
        self.dt_bias = nn.Parameter(torch.zeros(W), requires_grad=False)
        self.A_log = nn.Parameter(torch.zeros(1, 1, H, 1), requires_grad=False)  # the checkpoint's shape
        self.b_proj = linear(hidden_size, H, False)
        self.g_a_proj = linear(hidden_size, D, False)
        self.g_b_proj = linear(D, W, False)
        self.o_norm = RMSNormWeight(D, eps)
        self.o_proj = linear(W, hidden_size, False)

    @property
    def conv_shape(self) -> tuple[int, int]:
        return (3 * self.width, self.kernel - 1)

    @property
    def ssm_shape(self) -> tuple[int, int, int]:
        return (self.heads, self.head_dim, self.head_dim)

    def _split(self, mixed: torch.Tensor):
        n = mixed.shape[0]
        return tuple(x.reshape(n, self.heads, self.head_dim) for x in mixed.split(self.width, dim=-1))

    def forward(self, hidden: torch.Tensor, batch) -> torch.Tensor:
        ops, T, H, D = self.ops, hidden.shape[0], self.heads, self.head_dim
        if batch.state_pool is None:
            raise RuntimeError(f"layer {self.layer_id} is a KDA layer but the batch carries no state pool")
        conv_states = batch.state_pool.conv(self.layer_id)  # [slots, 3W, K-1]
        rec_states = batch.state_pool.ssm(self.layer_id)  # [slots, H, D, D]
        mixed, gate_a, decay_a, b = self._project(hidden)  # q|k|v, g_a_proj, f_a_proj, b_proj of hidden
        # One depthwise conv over q|k|v: the three convs are per channel, so their weights stack (once:
        # each conv's weight is re-pointed at its slice, as fused_linears.py stacks linears).
        w = stacked(self, "conv", (self.q_conv1d, self.k_conv1d, self.v_conv1d))[0][:, 0, :]
        # g = -exp(A_log) * softplus(f_b + dt_bias) [T, H, D] float32 (log decay <= 0), beta float32
        g, beta = ops.delta_rule_gates(self.f_b_proj(decay_a).view(T, H, D), b, self.A_log, self.dt_bias,
                                       torch.float32)
        y = torch.empty(T, H, D, dtype=hidden.dtype, device=hidden.device)
        run_delta_rule(batch, mixed, w, g, beta, conv_states, rec_states, self._split, y,
                       ops.causal_conv1d_update_inplace, ops.causal_conv1d_varlen_inplace,
                       ops.kda_recurrent_inplace, ops.kda_chunk)
        # Per-head RMSNorm, then the sigmoid gate, all in float32 (as the checkpoint's FusedRMSNormGated).
        gate = self.g_b_proj(gate_a)
        out = ops.gated_rms_norm(y.reshape(T * H, D), gate.reshape(T * H, D), self.o_norm.weight, self.o_norm.eps, D,
                                 norm_before_gate=True, activation="sigmoid", multiply_in_float32=True)
        return self.o_proj(out.reshape(T, self.width))

    def _project(self, hidden: torch.Tensor):
        """(q|k|v [T, 3W], g_a_proj, f_a_proj [T, D] each, b_proj [T, H]) of hidden: views of one GEMM over
        the six stacked weights (all read the layer input) where the device fuses q/k/v
        (FusedQKV.fuse_qkv; the checkpoint's names and shapes stay), else each its own product."""
        parts = (self.q_proj, self.k_proj, self.v_proj, self.g_a_proj, self.f_a_proj, self.b_proj)
        if fusing(FusedQKV.fuse_qkv, hidden) and can_stack(parts):
            weight, bias = stacked(self, "in_proj", parts)
            return F.linear(hidden, weight, bias).split([3 * self.width, self.head_dim, self.head_dim, self.heads],
                                                        dim=-1)
        return (torch.cat([p(hidden) for p in parts[:3]], dim=-1), *(p(hidden) for p in parts[3:]))
