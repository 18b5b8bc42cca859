"""The split form of the gated MoE (kernels/triton/moe_gated_split.py) against the reference's unsummed
experts under Triton's interpreter: 1, 2 and 4 tokens (at 4 tokens of top 3 over 6 experts, experts
shared by several tokens: only their first slot's programs work), gpt-oss's clamped SwiGLU on
interleaved gate/up with and without biases and plain SwiGLU on separate gate/up, the down product's
K split 1 (no reduction), 2, 3 (uneven last range) and 8 (empty ranges), in two Triton launches."""

from __future__ import annotations


from triton_interpreter import assert_interpreted_ok

_INTERPRETED = """
import torch
from bringup.core.bench.launch_count import LaunchCounter
from bringup.kernels.reference.moe_gated_experts import moe_gated_experts_unsummed as ref_parts
from bringup.kernels.triton import moe_gated_split as split
torch.manual_seed(0)
E, H, I = 6, 40, 36
gate_up = torch.randn(E, H, 2 * I) / H ** 0.5
gub, down, db = torch.randn(E, 2 * I) * 0.1, torch.randn(E, I, H) / I ** 0.5, torch.randn(E, H) * 0.1
interleaved = (gate_up[..., ::2].transpose(1, 2), gate_up[..., 1::2].transpose(1, 2), down.transpose(1, 2))
separate = (torch.randn(E, I, H) / H ** 0.5, torch.randn(E, I, H) / H ** 0.5, torch.randn(E, H, I) / I ** 0.5)
cases = [(interleaved, "swiglu_clamped", 1, (gub[:, ::2], gub[:, 1::2], db), 1.702, 7.0),
         (interleaved, "swiglu_clamped", 1, (None, None, None), 1.5, None),
         (separate, "silu", 0, (None, None, None), 1.702, None)]
# 16-wide tiles: K 36 in three 16-steps (the last partial), down K split into ranges of 16
split.TILE_OVERRIDE.update(up=(16, 16, 4, 2), down=(16, 16, 4, 2))
worst = 0.0
for T in (1, 2, 4):
    for split_k in (1, 2, 3, 8):
        split.TILE_OVERRIDE["split_k"] = split_k
        x = torch.randn(T, H)
        top, ids = torch.randn(T, E).topk(3, -1)
        w = torch.softmax(top, -1)
        for (g, u, d), act, act_id, (bg, bu, bd), alpha, limit in cases:
            with LaunchCounter() as c:
                got = split.moe_gated_split_unsummed(x, w, ids, g, u, d, act_id, bg, bu, bd, alpha, limit)
            launches = {name: n for name, n in c.counts.items() if name.startswith("triton:")}
            assert sorted(launches.values()) == [1, 1] and len(launches) == 2, c.counts
            want = ref_parts(x, w, ids, g, u, d, act, bg, bu, bd, alpha, limit)
            assert got.shape == (T, 3, H)
            worst = max(worst, float((got - want).norm() / want.norm()))
print("ok" if worst < 1e-5 else f"worst relative error {worst}")
"""


def test_split_gated_moe_matches_the_reference_interpreted():
    assert_interpreted_ok(_INTERPRETED, timeout=600)
