"""W8A8: fp8_e4m3 activations with a float32 scale per token and 128-wide group along K, against
block-scaled fp8 weights.

The scheme DeepSeek-V3 and Qwen3-FP8 run their prefill with: each token's activations are cut into
groups of ACT_GROUP along K, each group scaled so its absolute maximum is FP8_MAX and rounded to
e4m3; a 1 x 128 activation group then meets a 128 x 128 weight block, so both operands of every
K block are fp8 and the product runs on FP8 matrix units, the two scales applied to that block's
partial sum. These are the plain-torch references of the Triton kernels (kernels/triton/fp8_w8a8.py):
quantise, dequantise, multiply in float32.
"""

from __future__ import annotations

import torch

from .fp8_linear import FP8, FP8_MAX, fp8_linear

ACT_GROUP = 128  # activations per scale along K (the weights' block width in these checkpoints)
AMAX_FLOOR = 1e-12  # an all-zero group gets a tiny scale, not a division by zero


def w8a8_fits(block: tuple[int, int]) -> bool:
    """Whether a weight of scale blocks `block` can meet 1 x ACT_GROUP activation groups: every K
    block of ACT_GROUP lies in one weight scale block (a 128-multiple block, per channel or per tensor)."""
    return int(block[1]) % ACT_GROUP == 0


def quantize_activations(x: torch.Tensor, group: int = ACT_GROUP) -> tuple[torch.Tensor, torch.Tensor]:
    """x [M, K] -> (fp8 [M, K], float32 scales [M, ceil(K / group)]): each group's absolute maximum
    lands on FP8_MAX (the last group may be short)."""
    M, K = x.shape
    groups = -(-K // group)
    padded = torch.nn.functional.pad(x.float(), (0, groups * group - K)).reshape(M, groups, group)
    scale = padded.abs().amax(dim=-1, keepdim=True).clamp(min=AMAX_FLOOR) / FP8_MAX
    q = (padded / scale).clamp(-FP8_MAX, FP8_MAX).to(FP8).reshape(M, groups * group)[:, :K]
    return q.contiguous(), scale.reshape(M, groups).contiguous()


def dequantize_activations(q: torch.Tensor, scale: torch.Tensor, group: int = ACT_GROUP) -> torch.Tensor:
    """The float32 activations fp8 `q` [M, K] with its group scales stand for."""
    return q.float() * scale.repeat_interleave(group, dim=1)[:, :q.shape[1]]


def fp8_w8a8_linear(x: torch.Tensor, weight: torch.Tensor, scale: torch.Tensor, block: tuple[int, int],
                    bias: torch.Tensor | None = None) -> torch.Tensor:
    """fp8_linear with the activations rounded to fp8 per token and group first: x [..., K] times the
    dequantised weight [N, K], transposed, in x's dtype."""
    flat = x.reshape(-1, x.shape[-1])
    xq, xs = quantize_activations(flat)
    out = fp8_linear(dequantize_activations(xq, xs), weight, scale, block, bias)
    return out.to(x.dtype).reshape(*x.shape[:-1], weight.shape[0])
