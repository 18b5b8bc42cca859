"""Jamba's Mamba (v1) decode step from x_proj's output in one launch (kernels/triton/selective_scan.py
`selective_state_update_lowrank_inplace`: the dt/B/C RMSNorms and dt_proj's low-rank product inside the
state update) against its reference (kernels/reference/selective_state_update_lowrank.py, the model's
unfused composition): the reference is that composition bit for bit; the kernel under Triton's
interpreter at tiny shapes, and at Jamba-1.5-Mini's shapes on a GPU."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from bringup.kernels import reference as ref
from triton_interpreter import assert_interpreted_ok


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("with_norms", [True, False])
def test_reference_is_the_models_unfused_composition(dtype, with_norms):
    g = torch.Generator().manual_seed(0)
    b, D, N, R, eps = 3, 12, 5, 7, 1e-6
    r = lambda *s: torch.randn(*s, generator=g).to(dtype)  # noqa: E731
    x, z, x_dbl, W = r(b, D), r(b, D), r(b, R + 2 * N), r(D, R)
    A, Dv, bias = -torch.rand(D, N, generator=g), r(D), r(D)
    norms = (r(R), r(N), r(N)) if with_norms else None
    pool = torch.randn(6, D, N, generator=g)
    slots = torch.tensor([4, 0, 2])
    want_pool = pool.clone()
    dt, B, C = x_dbl.split([R, N, N], dim=-1)
    if with_norms:
        dt, B, C = (ref.rms_norm(dt, norms[0], eps), ref.rms_norm(B, norms[1], eps), ref.rms_norm(C, norms[2], eps))
    want = ref.selective_state_update_inplace(want_pool, slots, x, F.linear(dt, W), A, B, C, Dv, z, bias, True)
    got = ref.selective_state_update_lowrank_inplace(pool, slots, x, x_dbl, W, A, Dv, z, bias, True, norms, eps)
    assert torch.equal(got, want) and torch.equal(pool, want_pool)


_INTERPRETED = """
import torch
from bringup.kernels.reference import selective_state_update_lowrank_inplace as ref
from bringup.kernels.triton.selective_scan import selective_state_update_lowrank_inplace as fast
from slot_pools import assert_only_slots_written, nan_pool
torch.manual_seed(0)
bad = []
# non-power-of-two R, N and width; R past one chunk; with and without norms; bf16 inputs over a float32 pool
cases = [(3, 40, 5, 7, True, torch.float32), (2, 300, 16, 100, True, torch.float32),
         (2, 37, 3, 20, False, torch.float32), (3, 150, 6, 70, True, torch.bfloat16),
         (2, 33, 4, 9, False, torch.bfloat16)]
for batch, width, N, R, with_norms, dtype in cases:
    eps = 1e-6
    x_dbl = torch.randn(batch, R + 2 * N + 6).to(dtype)[:, 3:3 + R + 2 * N]  # a view, as a row slice may be
    x, z = torch.randn(batch, width).to(dtype), torch.randn(batch, width).to(dtype)
    W = (torch.randn(width, R) / R ** 0.5).to(dtype)
    A = -torch.rand(width, N) * 2
    Dv, bias = torch.randn(width).to(dtype), (0.5 * torch.randn(width)).to(dtype)
    norms = (torch.rand(R).add(0.5).to(dtype), torch.rand(N).add(0.5).to(dtype), torch.rand(N).add(0.5).to(dtype)) \\
        if with_norms else None
    pool, slots = nan_pool(batch, (width, N))
    want_pool = pool.clone()
    want = ref(want_pool, slots, x, x_dbl, W, A, Dv, z, bias, True, norms, eps)
    got = fast(pool, slots, x, x_dbl, W, A, Dv, z, bias, True, norms, eps)
    tol = dict(atol=1e-4, rtol=1e-4) if dtype == torch.float32 else dict(atol=5e-2, rtol=5e-2)
    what = f"batch={batch} width={width} N={N} R={R} norms={with_norms} {dtype}"
    try:
        assert got.dtype == want.dtype
        torch.testing.assert_close(got.float(), want.float(), **tol)
        torch.testing.assert_close(pool[slots], want_pool[slots], **tol)
        assert_only_slots_written(pool, slots)
    except AssertionError as err:
        bad.append(f"{what}: {err}")
print("ok" if not bad else "\\n".join(bad)[:4000])
"""


def test_triton_step_matches_the_reference_interpreted():
    assert_interpreted_ok(_INTERPRETED)


@pytest.mark.gpu
@pytest.mark.parametrize("batch", [1, 32])
def test_triton_step_at_jamba_shapes_matches_the_reference_on_the_gpu(batch):
    """Jamba-1.5-Mini: 8,192 channels, d_state 16, dt_rank 256, bf16 activations, a float32 state pool."""
    from bringup.kernels.triton.availability import GPU_DEVICE_TYPES, triton_reason
    from bringup.kernels.triton.selective_scan import selective_state_update_lowrank_inplace as fast

    device = next(d for d in GPU_DEVICE_TYPES if triton_reason(d) is None)
    width, N, R, eps = 8192, 16, 256, 1e-6
    g = torch.Generator(device=device).manual_seed(0)
    r = lambda *s: torch.randn(*s, device=device, generator=g)  # noqa: E731
    x, z, x_dbl = r(batch, width).bfloat16(), r(batch, width).bfloat16(), r(batch, R + 2 * N).bfloat16()
    W = (r(width, R) / R ** 0.5).bfloat16()
    dt0 = torch.exp(torch.empty(width, device=device).uniform_(-6.9, -2.3))
    bias = (dt0 + torch.log(-torch.expm1(-dt0))).bfloat16()
    A = -torch.arange(1, N + 1, device=device).float().repeat(width, 1)
    Dv = torch.ones(width, device=device).bfloat16()
    norms = tuple((1 + 0.1 * r(n)).bfloat16() for n in (R, N, N))
    pool = r(batch + 3, width, N)
    slots = torch.randperm(batch + 3, device=device, generator=g)[:batch]
    untouched = torch.ones(batch + 3, dtype=torch.bool, device=device)
    untouched[slots] = False
    before = pool[untouched].clone()
    want_pool = pool.clone()
    want = ref.selective_state_update_lowrank_inplace(want_pool, slots, x, x_dbl, W, A, Dv, z, bias, True, norms, eps)
    got = fast(pool, slots, x, x_dbl, W, A, Dv, z, bias, True, norms, eps)
    # The reference rounds dt_proj's output to bf16 after a differently ordered float32 sum; a dt one bf16
    # step apart moves y a little: the error is measured against the largest output (rel_err's way).
    for name, a, e in (("y", got.float(), want.float()), ("state", pool[slots], want_pool[slots])):
        assert torch.isfinite(a).all(), name
        err = ((a - e).abs().max() / e.abs().max().clamp_min(1e-6)).item()
        assert err <= 3e-2, f"{name}: error {err:.2e} relative to the largest output"
    assert torch.equal(pool[untouched], before)
