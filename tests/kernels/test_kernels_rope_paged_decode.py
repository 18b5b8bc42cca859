"""A decode step's norms, rotary, cache write and attention in one Triton launch
(kernels/triton/rope_paged_decode.py) against the reference (kernels/reference/rope_paged_decode.py:
qk_norm_rope_kv_write then paged_attention_decode) under Triton's interpreter: q/k/v as views of one
product, requests of different lengths over scattered pages, GQA, with and without the q/k norms,
both norm roundings, partial rotary, YaRN-like scaling, a sliding window, soft-capping, sinks, a
context cut in slices (merged after), a cache of another dtype; both the output and the cache. A GPU
test runs bf16 at Qwen3-8B's and gpt-oss's shapes."""

from __future__ import annotations


import pytest
import torch

from bringup.kernels.reference import paged_attention_decode, qk_norm_rope_kv_write, rope_paged_decode
from triton_interpreter import assert_interpreted_ok


def test_reference_is_the_rotary_write_then_the_attention():
    g = torch.Generator().manual_seed(0)
    B, Hq, Hkv, D = 2, 4, 2, 16
    q, k, v = (torch.randn(B, h, D, generator=g) for h in (Hq, Hkv, Hkv))
    caches = [[torch.randn(6, 4, Hkv, D, generator=g) for _ in range(2)]]
    caches.append([c.clone() for c in caches[0]])
    tables, ctx = torch.tensor([[3, 1, 0], [5, 2, 4]]), torch.tensor([7, 11])
    pos, slots = ctx - 1, torch.tensor([1 * 4 + 2, 4 * 4 + 2])
    inv_freq = 1.0 / 10000 ** (torch.arange(0, D, 2).float() / D)
    got = rope_paged_decode(q, k, v, pos, inv_freq, *caches[0], slots, tables, ctx, 0.25, sinks=torch.ones(Hq))
    rotated = qk_norm_rope_kv_write(q, k, v, pos, inv_freq, *caches[1], slots)
    want = paged_attention_decode(rotated, *caches[1], tables, ctx, 0.25, sinks=torch.ones(Hq))
    assert torch.equal(got, want) and all(torch.equal(a, b) for a, b in zip(caches[0], caches[1]))


_INTERPRETED = """
import torch
from bringup.kernels.reference import rope_paged_decode as ref
from bringup.kernels.triton import launch
from bringup.kernels.triton.rope_paged_decode import rope_paged_decode as fast
torch.manual_seed(0)
bad = []
B, Hq, Hkv, page = 3, 8, 2, 4
ctx = torch.tensor([9, 1, 400])  # the new token included; one request's first token; one in a later slice
# (no bfloat16 cache: the interpreter's bf16 tl.dot gives garbage, paged_attention_decode's own kernel too;
# the GPU test below runs it)
for dtype, cache_dtype in [(torch.float32, torch.float32), (torch.float16, torch.float16),
                           (torch.bfloat16, torch.float32)]:
    for norms, f32, scaling, rot, D, window, softcap, sinks, units in [
            (False, False, 1.0, None, 16, None, None, False, 4), (True, False, 1.0, None, 16, None, None, False, 4),
            (True, True, 1.3, None, 12, 5, None, True, 4), (False, False, 1.0, 8, 16, None, 20.0, False, 4),
            (True, False, 1.0, None, 16, None, None, True, 64), (False, False, 1.0, None, 16, 6, 20.0, False, 64)]:
        launch.INTERPRETED_COMPUTE_UNITS = units  # 64: more programs wanted, the 640-token tables in 2 slices
        qkv = torch.randn(B, (Hq + 2 * Hkv) * D).to(dtype)
        q, k, v = (x.view(B, -1, D) for x in qkv.split([Hq * D, Hkv * D, Hkv * D], dim=-1))
        pages = torch.randperm(512)[:B * 160].view(B, 160)
        pos = ctx - 1
        slots = pages.gather(1, (pos // page)[:, None])[:, 0] * page + pos % page
        R = rot or D
        inv_freq = 1.0 / 10000 ** (torch.arange(0, R, 2).float() / R)
        wdt = torch.float32 if f32 else dtype
        qn = (torch.rand(D) + 0.5).to(wdt) if norms else None
        kn = (torch.rand(D) + 0.5).to(wdt) if norms else None
        sk = torch.linspace(-1.0, 2.0, Hq) if sinks else None
        base = [torch.randn(512, page, Hkv, D).to(cache_dtype) for _ in range(2)]
        caches = [[c.clone() for c in base] for _ in range(2)]
        args = (pos, inv_freq)
        kw = dict(sliding_window=window, softcap=softcap, sinks=sk, scaling=scaling, q_norm=qn, k_norm=kn, eps=1e-6,
                  multiply_in_float32=f32, rotary_dim=rot)
        want = ref(q, k, v, *args, *caches[0], slots, pages, ctx, D ** -0.5, **kw)
        got = fast(q, k, v, *args, *caches[1], slots, pages, ctx, D ** -0.5, **kw)
        tol = {torch.float32: dict(atol=2e-5, rtol=2e-5), torch.float16: dict(atol=1e-2, rtol=1e-2),
               torch.bfloat16: dict(atol=5e-2, rtol=5e-2)}[dtype]  # the interpreter truncates to bf16
        what = f"{dtype} cache {cache_dtype} norms={norms} f32={f32} rot={rot} window={window} softcap={softcap} " \\
               f"sinks={sinks} units={units}"
        for a, b, part in [(got, want, "out"), (caches[1][0], caches[0][0], "k cache"),
                           (caches[1][1], caches[0][1], "v cache")]:
            try:
                torch.testing.assert_close(a.float(), b.float(), **tol)
            except AssertionError as err:
                bad.append(f"{what}: {part}: {err}")
print("ok" if not bad else "\\n".join(bad)[:4000])
"""


def test_triton_kernel_matches_the_reference_interpreted():
    assert_interpreted_ok(_INTERPRETED, timeout=600)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", ["qwen3-8b", "gpt-oss"])
def test_triton_kernel_at_real_shapes_matches_the_reference_on_the_gpu(shape):
    """bf16, q/k/v views of one product: Qwen3-8B (32 / 8 heads of 128, q/k norms), gpt-oss (64 / 8 heads
    of 64, YaRN scaling, sinks, a 128-token window); 1 and 32 requests of up to 2,000 tokens."""
    from bringup.kernels.triton.availability import GPU_DEVICE_TYPES, triton_reason
    from bringup.kernels.triton.rope_paged_decode import rope_paged_decode as fast

    device = next(d for d in GPU_DEVICE_TYPES if triton_reason(d) is None)
    Hq, Hkv, D = (32, 8, 128) if shape == "qwen3-8b" else (64, 8, 64)
    g = torch.Generator(device=device).manual_seed(0)
    for B in (1, 32):
        qkv = torch.randn(B, (Hq + 2 * Hkv) * D, device=device, generator=g).bfloat16()
        q, k, v = (x.view(B, -1, D) for x in qkv.split([Hq * D, Hkv * D, Hkv * D], dim=-1))
        ctx = torch.randint(1, 2000, (B,), device=device, generator=g)
        pages = torch.randperm(B * 125, device=device, generator=g).view(B, 125)
        pos = ctx - 1
        slots = pages.gather(1, (pos // 16)[:, None])[:, 0] * 16 + pos % 16
        inv_freq = (1.0 / 1e6 ** (torch.arange(0, D, 2, device=device).float() / D))
        kw = (dict(q_norm=(torch.rand(D, device=device) + 0.5).bfloat16(),
                   k_norm=(torch.rand(D, device=device) + 0.5).bfloat16()) if shape == "qwen3-8b" else
              dict(scaling=1.3, sinks=torch.linspace(-1.0, 2.0, Hq, device=device), sliding_window=128))
        base = [torch.randn(B * 125, 16, Hkv, D, device=device, generator=g).bfloat16() for _ in range(2)]
        caches = [[c.clone() for c in base] for _ in range(2)]
        want = rope_paged_decode(q, k, v, pos, inv_freq, *caches[0], slots, pages, ctx, D ** -0.5, **kw)
        got = fast(q, k, v, pos, inv_freq, *caches[1], slots, pages, ctx, D ** -0.5, **kw)
        torch.testing.assert_close(got.float(), want.float(), atol=2e-2, rtol=2e-2)
        for a, b in zip(caches[1], caches[0]):
            assert (a == b).float().mean().item() > 0.999
