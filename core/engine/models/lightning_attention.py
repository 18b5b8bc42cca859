"""The lightning-attention mixer (MiniMax-M1 / Text-01): silu(qkv_proj(x)) split per head into q,
k, v; decayed linear attention (kernels/reference/lightning_attention.py) with one fixed slope per
head and layer; RMSNorm over all heads; a sigmoid output gate from the layer input; out_proj.
Its state is the linear-attention state alone, [heads, head_dim, head_dim] per request (float32
by default): no conv window (`conv_shape` (0,): zero elements, as the layer map says).

The slopes follow MiniMax's ALiBi-like rule, scaled down with depth: base = 2^(-8 / H),
slope_h = base^(h + 1) * (1 - i / (L - 1 + 1e-5) + 1e-5) for layer i of L. They are derived, not
loaded (checkpoints saved by transformers carry them as buffers; those are skipped).
"""

from __future__ import annotations

import torch
from torch import nn

from .base import RMSNormWeight, linear
from .mamba2 import _state_plan


def slopes(heads: int, layer_index: int, num_layers: int) -> list[float]:
    base = 1 / (2 ** (8 / heads))
    factor = 1 - layer_index / (num_layers - 1 + 1e-5) + 1e-5
    return [base ** (h + 1) * factor for h in range(heads)]


class LightningAttention(nn.Module):
    def __init__(self, hidden_size: int, layer, ops, *, num_layers: int, eps: float):
        super().__init__()
        self.layer_id, self.ops = layer.index, ops
        self.heads, self.head_dim = layer.lightning.heads, layer.lightning.head_dim
        width = self.heads * self.head_dim
        self.qkv_proj = linear(hidden_size, 3 * width, False)
        self.output_gate = linear(hidden_size, width, False)
        self.norm = RMSNormWeight(width, eps)
        self.out_proj = linear(width, hidden_size, False)
        # Plain numbers: the module is built on the meta device; the tensor is made where it runs.
        self._slope_values = slopes(self.heads, layer.index, num_layers)
        self._slopes: torch.Tensor | None = None

    @property
    def conv_shape(self) -> tuple[int]:
        return (0,)

    @property
    def ssm_shape(self) -> tuple[int, int, int]:
        return (self.heads, self.head_dim, self.head_dim)

    def forward(self, hidden: torch.Tensor, batch) -> torch.Tensor:
        ops, T = self.ops, hidden.shape[0]
        if batch.state_pool is None:
            raise RuntimeError(f"layer {self.layer_id} is a lightning-attention layer but the batch carries no state pool")
        if self._slopes is None or self._slopes.device != hidden.device:
            self._slopes = torch.tensor(self._slope_values, dtype=torch.float32, device=hidden.device)
        states = batch.state_pool.ssm(self.layer_id)  # [slots, H, D, D]
        qkv = torch.nn.functional.silu(self.qkv_proj(hidden)).view(T, self.heads, 3 * self.head_dim)
        q, k, v = qkv.split(self.head_dim, dim=-1)
        plan = _state_plan(batch, hidden.device)
        y = torch.empty(T, self.heads, self.head_dim, dtype=hidden.dtype, device=hidden.device)
        if plan.all_rows_step or plan.step_rows is not None:
            rows = slice(None) if plan.all_rows_step else plan.step_rows
            y[rows] = ops.lightning_attention_recurrent_inplace(q[rows], k[rows], v[rows], self._slopes, states,
                                                                plan.step_slots)
        if plan.scan_rows is not None:
            rows, slots, has = plan.scan_rows, plan.scan_slots, plan.scan_has_state
            init = torch.where(has[:, None, None, None], states[slots].float(), 0)  # a new prompt starts from zeros
            ys, final = ops.lightning_attention_chunk(q[rows], k[rows], v[rows], self._slopes, plan.scan_starts, init)
            states[slots] = final.to(states.dtype)
            y[rows] = ys
        # RMSNorm over all heads, then the sigmoid gate: one launch (norm_before_gate; the norm rounded to
        # the model's dtype before the weight and the gate, as the checkpoint's RMSNorm and product do)
        width = self.heads * self.head_dim
        out = ops.gated_rms_norm(y.reshape(T, width), self.output_gate(hidden), self.norm.weight, self.norm.eps, width,
                                 norm_before_gate=True, activation="sigmoid")
        return self.out_proj(out)
