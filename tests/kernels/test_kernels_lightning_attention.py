"""Lightning attention's two plain-torch forms (kernels/reference/lightning_attention.py) agree:
chunked (prefill) equals token by token (decode), with and without an entering state; the varlen op
equals each sequence alone; the in-place decode step touches only its slots."""

from __future__ import annotations

import pytest
import torch

from bringup.kernels.reference import lightning_attention as la


def inputs(T, H=3, dk=8, dv=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(T, H, dk, generator=g), torch.randn(T, H, dk, generator=g), torch.randn(T, H, dv, generator=g),
            torch.tensor([0.5, 0.1, 0.02]))


@pytest.mark.parametrize("T,chunk", [(1, 64), (7, 4), (37, 8)])
@pytest.mark.parametrize("with_state", [False, True])
def test_chunked_equals_recurrent(T, chunk, with_state):
    q, k, v, s = inputs(T)
    s0 = torch.randn(3, 8, 6) if with_state else None
    o1, f1 = la.lightning_recurrent(q, k, v, s, s0)
    o2, f2 = la.lightning_chunked(q, k, v, s, s0, chunk_size=chunk)
    torch.testing.assert_close(o2, o1, atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(f2, f1, atol=1e-4, rtol=1e-5)


def test_varlen_and_in_place_step_agree_with_one_sequence():
    q, k, v, s = inputs(12)
    starts = [0, 4, 5, 12]
    init = torch.randn(3, 3, 8, 6)
    o, finals = la.lightning_attention_chunk(q, k, v, s, starts, init)
    for i, (a, e) in enumerate(zip(starts[:-1], starts[1:])):
        oi, fi = la.lightning_recurrent(q[a:e], k[a:e], v[a:e], s, init[i])
        torch.testing.assert_close(o[a:e], oi, atol=1e-4, rtol=1e-5)
        torch.testing.assert_close(finals[i], fi, atol=1e-4, rtol=1e-5)
    pool = torch.randn(4, 3, 8, 6)
    before = pool.clone()
    slots = torch.tensor([2, 0])
    out = la.lightning_attention_recurrent_inplace(q[:2], k[:2], v[:2], s, pool, slots)
    for i, slot in enumerate([2, 0]):
        oi, fi = la.lightning_recurrent(q[i:i + 1], k[i:i + 1], v[i:i + 1], s, before[slot])
        torch.testing.assert_close(out[i], oi[0], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(pool[slot], fi, atol=1e-5, rtol=1e-5)
    assert torch.equal(pool[[1, 3]], before[[1, 3]])


_INTERPRETED = """
import torch
from bringup.kernels.reference.lightning_attention import lightning_attention_recurrent_inplace as ref
from bringup.kernels.triton.lightning_attention_decode import lightning_attention_recurrent_inplace as fast
from slot_pools import assert_only_slots_written, nan_pool
torch.manual_seed(0)
bad = []
for B, H, dk, dv, act, pool_dtype in [(3, 3, 8, 6, torch.float32, torch.float32), (2, 2, 16, 40, torch.float32, torch.float32),
                                      (4, 2, 12, 16, torch.bfloat16, torch.float32), (2, 2, 16, 16, torch.float16, torch.float16)]:
    qkv = torch.randn(B, H, 2 * dk + dv).to(act)  # q/k/v as views of one product, as the model has them
    q, k, v = qkv.split([dk, dk, dv], dim=-1)
    slopes = torch.rand(H) + 0.01
    pool, slots = nan_pool(B, (H, dk, dv), pool_dtype)
    want_pool = pool.clone()
    want = ref(q, k, v, slopes, want_pool, slots)
    got = fast(q, k, v, slopes, pool, slots)
    tol = dict(atol=1e-5, rtol=1e-5) if act == torch.float32 else dict(atol=2e-2, rtol=2e-2)
    what = f"B={B} H={H} dk={dk} dv={dv} {act} pool {pool_dtype}"
    try:
        torch.testing.assert_close(got.float(), want.float(), **tol)
        torch.testing.assert_close(pool[slots].float(), want_pool[slots].float(), **tol)
        assert_only_slots_written(pool, slots)
    except AssertionError as err:
        bad.append(f"{what}: {err}")
print("ok" if not bad else "\\n".join(bad)[:4000])
"""


def test_triton_decode_step_matches_the_reference_interpreted():
    """kernels/triton/lightning_attention_decode.py under Triton's interpreter: value dims past one tile,
    dims that are no power of two, q/k/v as strided views, bf16/fp16 activations, scattered slots."""
    from triton_interpreter import assert_interpreted_ok

    assert_interpreted_ok(_INTERPRETED)
