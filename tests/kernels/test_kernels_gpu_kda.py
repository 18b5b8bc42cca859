"""flash-linear-attention's Kimi Delta Attention (kernels/fla/kda.py) against the plain-torch
reference (kernels/reference/kda.py): the varlen chunked form for prompts, with entering states and
grouped value heads, and the decode step that must write only its own slots of a NaN-poisoned pool.
Skipped without a GPU where fla runs (the helpers are test_kernels_gpu.py's)."""

from __future__ import annotations

import pytest
import torch

from bringup.kernels import reference as ref
from test_kernels_gpu import GPU, assert_close_rel, needs_fla, poison_allocator, tol_for


def _inputs(T, Hk, Hv, dk, dv, dtype):
    q, k = (torch.randn(T, Hk, dk, device=GPU, dtype=dtype) for _ in range(2))
    v = torch.randn(T, Hv, dv, device=GPU, dtype=dtype)
    g = -torch.rand(T, Hv, dk, device=GPU) * 0.5  # per key channel log decay
    beta = torch.rand(T, Hv, device=GPU, dtype=dtype)
    return q, k, v, g, beta


@needs_fla
@pytest.mark.parametrize("Hk,Hv", [(4, 4), (2, 4)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fla_kda_chunk_matches_reference(Hk, Hv, dtype):
    from bringup.kernels.fla.kda import kda_chunk

    starts = [0, 70, 71, 200]
    q, k, v, g, beta = _inputs(200, Hk, Hv, 64, 64, dtype)
    init = torch.randn(3, Hv, 64, 64, device=GPU) * 0.1
    poison_allocator()
    o, final = kda_chunk(q, k, v, g, beta, starts, init)
    ro, rfinal = ref.kda_chunk(q, k, v, g, beta, starts, init)
    assert_close_rel(o, ro, tol_for(dtype) * 5, "output")
    assert_close_rel(final, rfinal, tol_for(dtype) * 5, "final states")


@needs_fla
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fla_kda_decode_touches_only_its_slots(dtype):
    from bringup.kernels.fla.kda import kda_recurrent_inplace

    q, k, v, g, beta = _inputs(3, 4, 4, 64, 64, dtype)
    pool = torch.full((6, 4, 64, 64), float("nan"), device=GPU)
    slots = torch.tensor([4, 0, 2], device=GPU)
    pool[slots] = torch.randn(3, 4, 64, 64, device=GPU) * 0.1
    ref_pool = pool.clone()
    o = kda_recurrent_inplace(q, k, v, g, beta, pool, slots)
    ro = ref.kda_recurrent_inplace(q, k, v, g, beta, ref_pool, slots)
    assert_close_rel(o, ro, tol_for(dtype) * 5, "output")
    assert_close_rel(pool[slots], ref_pool[slots], tol_for(dtype) * 5, "stepped states")
    assert torch.isnan(pool[[1, 3, 5]]).all(), "a slot outside the batch was written"
