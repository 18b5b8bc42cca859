"""The one-launch decode step of the gated delta rule and of KDA (kernels/triton/delta_rule_decode.py)
against the references (gated_delta_rule_recurrent_inplace, kda_recurrent_inplace): under Triton's
interpreter at tiny shapes (dims not powers of two, grouped value heads, q/k as views of one product,
bf16 and float32 states, slots out of order and one counted from the end, dv split over programs,
no L2 norm and a scale of its own), the stepped slots equal the reference's, the others stay NaN,
and a step is one launch; on a GPU at Qwen3-Next's and Kimi-Linear's shapes."""

from __future__ import annotations

import pytest
import torch

from bringup.kernels import reference as ref
from triton_interpreter import assert_interpreted_ok
from test_kernels_gpu import GPU, assert_close_rel, needs_triton, poison_allocator, tol_for

_INTERPRETED = """
import torch
from bringup.core.bench.launch_count import LaunchCounter
from bringup.kernels import reference as ref
from bringup.kernels.triton import delta_rule_decode as fast
torch.manual_seed(0)
bad = []
def case(kda, B, Hk, Hv, dk, dv, dtype, state_dtype, slots, tile, scale=None, l2=True):
    fast.TILE_ELEMENTS = tile  # a small tile splits dv over programs
    mixed = torch.randn(B, 2 * Hk * dk + 3).to(dtype)  # q and k as strided views, as the model's split
    q, k = (mixed[:, i * Hk * dk:(i + 1) * Hk * dk].view(B, Hk, dk) for i in range(2))
    v = torch.randn(B, Hv, dv).to(dtype)
    g = -torch.rand(B, Hv, dk) * 0.5 if kda else -torch.rand(B, Hv)
    beta = torch.rand(B, Hv).to(dtype)
    pool = torch.full((7, Hv, dk, dv), float("nan"), dtype=state_dtype)
    pool[slots] = (torch.randn(len(slots), Hv, dk, dv) * 0.3).to(state_dtype)
    want_pool = pool.clone()
    step, ref_step = ((fast.kda_recurrent_inplace, ref.kda_recurrent_inplace) if kda else
                      (fast.gated_delta_rule_recurrent_inplace, ref.gated_delta_rule_recurrent_inplace))
    with LaunchCounter() as launches:
        o = step(q, k, v, g, beta, pool, torch.tensor(slots), scale, l2)
    want = ref_step(q, k, v, g, beta, want_pool, torch.tensor(slots), scale, l2)
    what = f"kda={kda} B={B} Hk={Hk} Hv={Hv} dk={dk} dv={dv} {dtype} state {state_dtype} tile {tile} l2={l2}"
    # (bf16: the interpreter truncates to bf16 where a GPU rounds to nearest)
    tol = dict(atol=3e-2, rtol=3e-2) if torch.bfloat16 in (dtype, state_dtype) else dict(atol=2e-5, rtol=2e-5)
    try:
        assert o.dtype == v.dtype and o.shape == v.shape
        torch.testing.assert_close(o, want, **tol)
        torch.testing.assert_close(pool[slots], want_pool[slots], **tol)
        others = torch.ones(7, dtype=torch.bool)
        others[slots] = False
        assert pool[others].isnan().all(), "a slot outside the batch was written"
        assert dict(launches.counts) == {"triton:_delta_rule_step_kernel": 1}, launches.counts
    except AssertionError as err:
        bad.append(f"{what}: {err}")
for kda in (False, True):
    case(kda, 3, 2, 4, 12, 20, torch.float32, torch.float32, [4, 0, 2], 4096)
    case(kda, 3, 2, 4, 12, 20, torch.float32, torch.float32, [4, 0, 2], 256)  # dv in 2 programs of 16
    case(kda, 3, 2, 4, 12, 20, torch.bfloat16, torch.bfloat16, [5, 1, -1], 256)  # -1: the last slot
    case(kda, 2, 3, 3, 16, 8, torch.bfloat16, torch.float32, [6, 3], 4096)  # no grouping, bf16 in, f32 state
    case(kda, 2, 1, 3, 10, 9, torch.float32, torch.float32, [2, 0], 4096, scale=0.7, l2=False)
print("ok" if not bad else "\\n".join(bad)[:3000])
"""


def test_decode_steps_match_the_references_interpreted():
    assert_interpreted_ok(_INTERPRETED, timeout=180)


def _gpu_inputs(kda, B, Hk, Hv, d, dtype, state_dtype, slots_total=160):
    q, k = (torch.randn(B, Hk, d, device=GPU, dtype=dtype) for _ in range(2))
    v = torch.randn(B, Hv, d, device=GPU, dtype=dtype)
    g = -torch.rand(B, Hv, d, device=GPU) * 0.5 if kda else -torch.rand(B, Hv, device=GPU)
    beta = torch.rand(B, Hv, device=GPU, dtype=dtype)
    pool = torch.full((slots_total, Hv, d, d), float("nan"), device=GPU, dtype=state_dtype)
    slots = torch.randperm(slots_total, device=GPU)[:B]
    pool[slots] = (torch.randn(B, Hv, d, d, device=GPU) * 0.1).to(state_dtype)
    return q, k, v, g, beta, pool, slots


@needs_triton
@pytest.mark.parametrize("model,kda,Hk,Hv", [("Qwen3-Next", False, 16, 32), ("Kimi-Linear", True, 32, 32)])
@pytest.mark.parametrize("state_dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("B", [1, 33])
def test_decode_step_at_real_shapes_matches_the_reference_on_the_gpu(model, kda, Hk, Hv, state_dtype, B):
    from bringup.kernels.triton import delta_rule_decode as fast

    q, k, v, g, beta, pool, slots = _gpu_inputs(kda, B, Hk, Hv, 128, torch.bfloat16, state_dtype)
    want_pool = pool.clone()
    step, ref_step = ((fast.kda_recurrent_inplace, ref.kda_recurrent_inplace) if kda else
                      (fast.gated_delta_rule_recurrent_inplace, ref.gated_delta_rule_recurrent_inplace))
    want = ref_step(q, k, v, g, beta, want_pool, slots)
    poison_allocator()
    o = step(q, k, v, g, beta, pool, slots)
    assert_close_rel(o, want, tol_for(torch.bfloat16), f"{model} output")
    assert_close_rel(pool[slots], want_pool[slots], tol_for(state_dtype), f"{model} stepped states")
    others = torch.ones(pool.shape[0], dtype=torch.bool, device=GPU)
    others[slots] = False
    assert pool[others].isnan().all(), "a slot outside the batch was written"
