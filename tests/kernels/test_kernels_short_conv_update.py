"""LFM2's gated short-conv decode step in one launch (kernels/triton/causal_conv1d_update.py
`short_conv_update_inplace`) against its reference (kernels/reference/short_conv_update_inplace.py,
the unfused B * x, conv step, C * y): under Triton's interpreter, and at LFM2-2.6B's width on a GPU."""

from __future__ import annotations

import pytest
import torch

from bringup.kernels import reference as ref
from triton_interpreter import assert_interpreted_ok


def test_reference_is_the_three_unfused_steps():
    g = torch.Generator().manual_seed(0)
    bcx, w = torch.randn(3, 3 * 5, generator=g), torch.randn(5, 3, generator=g)
    pool = torch.randn(4, 5, 2, generator=g)
    expected_pool, slots = pool.clone(), torch.tensor([3, 0, 2])
    B, C, x = bcx.chunk(3, dim=-1)
    want = C * ref.causal_conv1d_update_inplace(B * x, expected_pool, slots, w, None, None)
    got = ref.short_conv_update_inplace(bcx, pool, slots, w, None)
    assert torch.equal(got, want) and torch.equal(pool, expected_pool)


_INTERPRETED = """
import torch
from bringup.kernels.reference import short_conv_update_inplace as ref
from bringup.kernels.triton.causal_conv1d_update import short_conv_update_inplace as fast
from slot_pools import assert_only_slots_written, nan_pool
torch.manual_seed(0)
bad = []
# channels past one 256-wide program and not a multiple of it; biased and not; bf16 rows over a bf16 pool
for batch, channels, width, bias, dtype in [(3, 40, 3, False, torch.float32), (2, 300, 4, True, torch.float32),
                                            (4, 257, 3, False, torch.bfloat16)]:
    bcx = torch.randn(batch, 3 * channels + 8).to(dtype)[:, 4:4 + 3 * channels]  # a view, as in_proj's rows may be
    w = torch.randn(channels, width).to(dtype)
    b = torch.randn(channels).to(dtype) if bias else None
    pool, slots = nan_pool(batch, (channels, width - 1), dtype)
    want_pool = pool.clone()
    want = ref(bcx, want_pool, slots, w, b)
    got = fast(bcx, pool, slots, w, b)
    tol = dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else dict(atol=3e-2, rtol=3e-2)
    what = f"batch={batch} channels={channels} width={width} bias={bias} {dtype}"
    try:
        torch.testing.assert_close(got.float(), want.float(), **tol)
        torch.testing.assert_close(pool[slots].float(), want_pool[slots].float(), **tol)
        assert_only_slots_written(pool, slots)
    except AssertionError as err:
        bad.append(f"{what}: {err}")
print("ok" if not bad else "\\n".join(bad)[:4000])
"""


def test_triton_step_matches_the_reference_interpreted():
    assert_interpreted_ok(_INTERPRETED)


@pytest.mark.gpu
@pytest.mark.parametrize("batch", [1, 32])
def test_triton_step_at_lfm2_width_matches_the_reference_on_the_gpu(batch):
    """LFM2-2.6B: 2,048 channels, a 3-wide conv, bf16."""
    from bringup.kernels.triton.availability import GPU_DEVICE_TYPES, triton_reason
    from bringup.kernels.triton.causal_conv1d_update import short_conv_update_inplace as fast

    device = next(d for d in GPU_DEVICE_TYPES if triton_reason(d) is None)
    g = torch.Generator(device=device).manual_seed(0)
    bcx = torch.randn(batch, 3 * 2048, device=device, generator=g).bfloat16()
    w = torch.randn(2048, 3, device=device, generator=g).bfloat16()
    pool = torch.randn(batch + 3, 2048, 2, device=device, generator=g).bfloat16()
    slots = torch.randperm(batch + 3, device=device, generator=g)[:batch]
    want_pool = pool.clone()
    want = ref.short_conv_update_inplace(bcx, want_pool, slots, w, None)
    got = fast(bcx, pool, slots, w, None)
    # The reference rounds each tap's product to bf16 (window_taps multiplies in the weight's dtype), the
    # kernel adds them in float32: a conv output one bf16 step apart, times C, is 0.06 off at |y| ~ 5 (seen
    # on an H100: 1 element of 65,536). So the error is measured against the largest output, as the
    # conv step's own GPU test does (tests/kernels/test_kernels_gpu.py, rel_err).
    err = (got.float() - want.float()).abs().max() / want.float().abs().max()
    assert err <= 1e-2, f"largest error {err:.2e} of the largest output"
    torch.testing.assert_close(pool.float(), want_pool.float(), atol=1e-2, rtol=1e-2)
