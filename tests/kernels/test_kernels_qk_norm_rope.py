"""q/k RMSNorm + rotary + KV-cache write as one op (kernels/reference/qk_norm_rope_kv_write.py) and its
Triton kernel (kernels/triton/qk_norm_rope.py), under Triton's interpreter on the CPU: q/k/v as views
of one fused q/k/v product, with and without the per-head norms, both norm roundings, a YaRN-like
scaling, partial rotary, a cache of another dtype, slots scattered over the pages."""

from __future__ import annotations


import pytest
import torch

from bringup.kernels.reference import apply_rotary, kv_cache_write, rms_norm
from bringup.kernels.reference.qk_norm_rope_kv_write import qk_norm_rope_kv_write
from precision_helpers import assert_as_accurate_as_reference
from triton_interpreter import assert_interpreted_ok


def _problem(T=5, Hq=4, Hkv=2, D=16, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    qkv = torch.randn(T, (Hq + 2 * Hkv) * D, generator=g).to(dtype)
    q, k, v = qkv.split([Hq * D, Hkv * D, Hkv * D], dim=-1)
    q, k, v = q.view(T, Hq, D), k.view(T, Hkv, D), v.view(T, Hkv, D)
    positions = torch.randint(0, 300, (T,), generator=g)
    slots = torch.randperm(6 * 4, generator=g)[:T]
    return q, k, v, positions, slots


def test_reference_norms_rotates_and_writes_as_the_unfused_layer():
    q, k, v, pos, slots = _problem()
    inv_freq = 1.0 / 10000 ** (torch.arange(0, 16, 2).float() / 16)
    qn, kn = torch.rand(16) + 0.5, torch.rand(16) + 0.5
    kc, vc = torch.zeros(6, 4, 2, 16), torch.zeros(6, 4, 2, 16)
    got = qk_norm_rope_kv_write(q, k, v, pos, inv_freq, kc, vc, slots, 1.0, qn, kn, 1e-6)
    want_q = apply_rotary(rms_norm(q, qn, 1e-6), pos, inv_freq)
    kc2, vc2 = torch.zeros_like(kc), torch.zeros_like(vc)
    kv_cache_write(kc2, vc2, slots, apply_rotary(rms_norm(k, kn, 1e-6), pos, inv_freq), v)
    assert torch.equal(got, want_q) and torch.equal(kc, kc2) and torch.equal(vc, vc2)


def test_reference_partial_rotary_leaves_the_tail_of_each_head():
    q, k, v, pos, slots = _problem()
    inv_freq = 1.0 / 10000 ** (torch.arange(0, 8, 2).float() / 8)
    kc, vc = torch.zeros(6, 4, 2, 16), torch.zeros(6, 4, 2, 16)
    got = qk_norm_rope_kv_write(q, k, v, pos, inv_freq, kc, vc, slots, rotary_dim=8)
    assert torch.equal(got[..., 8:], q[..., 8:])
    assert torch.equal(got[..., :8], apply_rotary(q[..., :8].contiguous(), pos, inv_freq))


_INTERPRETED = """
import torch
from bringup.kernels.reference.qk_norm_rope_kv_write import qk_norm_rope_kv_write as ref
from bringup.kernels.triton.qk_norm_rope import qk_norm_rope_kv_write as fast
torch.manual_seed(0)
bad = []
for dtype, cache_dtype in [(torch.float32, torch.float32), (torch.bfloat16, torch.bfloat16),
                           (torch.bfloat16, torch.float32), (torch.float16, torch.float16)]:
    for norms, f32_mul, scaling, rot, D in [(False, False, 1.0, None, 16), (True, False, 1.0, None, 16),
                                           (True, True, 1.3, None, 12), (False, False, 1.0, 8, 16)]:
        T, Hq, Hkv = 5, 4, 2
        qkv = torch.randn(T, (Hq + 2 * Hkv) * D).to(dtype)
        q, k, v = qkv.split([Hq * D, Hkv * D, Hkv * D], dim=-1)
        q, k, v = q.view(T, Hq, D), k.view(T, Hkv, D), v.view(T, Hkv, D)
        pos = torch.randint(0, 300, (T,))
        slots = torch.randperm(24)[:T]
        R = rot or D
        inv_freq = 1.0 / 10000 ** (torch.arange(0, R, 2).float() / R)
        wdt = torch.float32 if f32_mul else dtype
        qn = (torch.rand(D) + 0.5).to(wdt) if norms else None
        kn = (torch.rand(D) + 0.5).to(wdt) if norms else None
        caches = [[torch.zeros(6, 4, Hkv, D, dtype=cache_dtype) for _ in range(2)] for _ in range(2)]
        want = ref(q, k, v, pos, inv_freq, *caches[0], slots, scaling, qn, kn, 1e-6, f32_mul, rot)
        got = fast(q, k, v, pos, inv_freq, *caches[1], slots, scaling, qn, kn, 1e-6, f32_mul, rot)
        # bf16 looser: the interpreter truncates float32 to bfloat16 at each rounding (GPUs round to nearest)
        tol = {torch.float32: dict(atol=1e-5, rtol=1e-5), torch.float16: dict(atol=1e-2, rtol=1e-2),
               torch.bfloat16: dict(atol=6e-2, rtol=6e-2)}[dtype]
        for a, b, what in [(got, want, "q"), (caches[1][0], caches[0][0], "k cache"), (caches[1][1], caches[0][1], "v cache")]:
            try:
                torch.testing.assert_close(a, b, **tol)
            except AssertionError as err:
                bad.append(f"{dtype} cache {cache_dtype} norms={norms} f32={f32_mul} rot={rot}: {what}: {err}")
        # fp16: the same rounding order, so all but an ulp here and there agree exactly (not checked in
        # bf16: the interpreter truncates float32 to bfloat16 where GPUs round to nearest)
        if dtype == torch.float16:
            same = (got == want).float().mean().item()
            if same < 0.97:
                bad.append(f"{dtype} norms={norms}: only {same:.1%} of q equal to the reference")
print("ok" if not bad else "\\n".join(bad)[:3000])
"""


def test_triton_kernel_matches_the_reference_interpreted():
    assert_interpreted_ok(_INTERPRETED, timeout=180)


@pytest.mark.gpu
@pytest.mark.parametrize("norms", [False, True])
def test_triton_kernel_at_qwen3_8b_shapes_matches_the_reference_on_the_gpu(norms):
    """Qwen3-8B's attention (32 query heads, 8 KV heads of 128) in bf16, 3 and 64 tokens, q/k/v views of
    one product: q and the cache as close to the float32 answer as the reference's."""
    from bringup.kernels.triton.availability import GPU_DEVICE_TYPES, triton_reason
    from bringup.kernels.triton.qk_norm_rope import qk_norm_rope_kv_write as fast

    device = next(d for d in GPU_DEVICE_TYPES if triton_reason(d) is None)
    torch.manual_seed(0)
    for T in (3, 64):
        qkv = torch.randn(T, 48 * 128, device=device, dtype=torch.bfloat16)
        q, k, v = (x.view(T, -1, 128) for x in qkv.split([32 * 128, 8 * 128, 8 * 128], dim=-1))
        pos = torch.randint(0, 4000, (T,), device=device)
        slots = torch.randperm(64 * 16, device=device)[:T]
        inv_freq = (1.0 / 1e6 ** (torch.arange(0, 128, 2).float() / 128)).to(device)
        qn = (torch.rand(128, device=device) + 0.5).bfloat16() if norms else None
        kn = (torch.rand(128, device=device) + 0.5).bfloat16() if norms else None
        caches = [[torch.zeros(64, 16, 8, 128, device=device, dtype=torch.bfloat16) for _ in range(2)] for _ in range(2)]
        want = qk_norm_rope_kv_write(q, k, v, pos, inv_freq, *caches[0], slots, 1.0, qn, kn, 1e-6)
        got = fast(q, k, v, pos, inv_freq, *caches[1], slots, 1.0, qn, kn, 1e-6)
        true_caches = [torch.zeros(64, 16, 8, 128, device=device) for _ in range(2)]
        f32 = (lambda w: None if w is None else w.float())
        truth = qk_norm_rope_kv_write(q.float(), k.float(), v.float(), pos, inv_freq, *true_caches, slots, 1.0,
                                      f32(qn), f32(kn), 1e-6)
        for what, a, b, t in [("q", got, want, truth), ("k cache", caches[1][0], caches[0][0], true_caches[0]),
                              ("v cache", caches[1][1], caches[0][1], true_caches[1])]:
            torch.testing.assert_close(a, b, atol=2e-2, rtol=2e-2)
            assert_as_accurate_as_reference(a, b, t, f"{what}, {T} tokens")
