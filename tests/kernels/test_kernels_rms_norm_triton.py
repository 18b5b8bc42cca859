"""The Triton RMSNorm op (kernels/triton/norms.py: rms_norm, the add_rms_norm kernel with nothing to add)
against the reference (kernels/reference/rms_norm.py) under Triton's interpreter: float32, bfloat16 and
float16; the weight in the input's dtype or in float32 multiplied there (Gemma's 1 + w); rows of
[T, H], of [T, heads, D], and views into a wider product; tensors that are not such a view, and a
float32 weight multiplied in bfloat16 (the reference promotes), go to the reference, as it returns.
Also add_rms_norm with the delta's own norm first (delta_weight: Gemma's post norms in the residual
add's kernel): the reference is rms_norm, add, rms_norm; the kernel matches it. And a MoE's routed
parts with no shared part ((None, [T, k, H])): summed, then added; and a shared part scaled by
sigmoid of its gate logits ((shared, routed, gate [T, 1]): Qwen3-Next), rounded as the model rounds."""

from __future__ import annotations


import pytest
import torch

from bringup.kernels.reference import add_rms_norm, rms_norm
from triton_interpreter import assert_interpreted_ok, run_interpreted


@pytest.mark.parametrize("f32", [True, False])
def test_reference_add_with_the_deltas_own_norm_is_norm_add_norm(f32):
    g = torch.Generator().manual_seed(0)
    h, d = torch.randn(3, 32, generator=g).bfloat16(), (4 * torch.randn(3, 32, generator=g)).bfloat16()
    w, dw = torch.rand(32, generator=g) + 0.5, torch.rand(32, generator=g) + 0.5
    if not f32:
        w, dw = w.bfloat16(), dw.bfloat16()
    new, y = add_rms_norm(h, d, w, 1e-6, multiply_in_float32=f32, delta_weight=dw, delta_eps=1e-5)
    want = h + rms_norm(d, dw, 1e-5, multiply_in_float32=f32)
    assert torch.equal(new, want) and torch.equal(y, rms_norm(want, w, 1e-6, multiply_in_float32=f32))


def test_reference_add_of_routed_parts_without_a_shared_part_sums_them_first():
    g = torch.Generator().manual_seed(1)
    h, routed = torch.randn(3, 16, generator=g).bfloat16(), torch.randn(3, 2, 16, generator=g).bfloat16()
    new, _ = add_rms_norm(h, (None, routed), torch.ones(16), 1e-6)
    assert torch.equal(new, h + routed.sum(1))


_INTERPRETED = """
import torch
from bringup.kernels.reference import rms_norm as ref
from bringup.kernels.triton.norms import rms_norm as fast
torch.manual_seed(0)
bad = []
for dtype in (torch.float32, torch.bfloat16, torch.float16):
    tol = {torch.float32: dict(atol=1e-5, rtol=1e-5), torch.float16: dict(atol=1e-2, rtol=1e-2),
           torch.bfloat16: dict(atol=6e-2, rtol=6e-2)}[dtype]  # the interpreter truncates to bf16
    wide = 2 * torch.randn(5, 48 + 8).to(dtype)
    cases = {"rows": wide[:, :48].contiguous(), "heads": wide[:, :48].reshape(5, 3, 16).contiguous(),
             "view": wide[:, :48], "transposed": wide[:, :48].t()}
    for name, x in cases.items():
        H = x.shape[-1]
        for w_dtype, f32 in ((dtype, False), (torch.float32, True), (torch.float32, False)):
            w = (torch.rand(H) + 0.5).to(w_dtype)
            got, want = fast(x, w, 1e-6, multiply_in_float32=f32), ref(x, w, 1e-6, multiply_in_float32=f32)
            try:
                assert got.dtype == want.dtype and got.shape == want.shape
                torch.testing.assert_close(got, want, **tol)
            except AssertionError as err:
                bad.append(f"{dtype} {name} weight {w_dtype} f32={f32}: {err}")
from bringup.kernels.reference import add_rms_norm as ref_add
from bringup.kernels.triton.norms import add_rms_norm as fast_add
for dtype in (torch.float32, torch.bfloat16, torch.float16):
    tol = {torch.float32: dict(atol=1e-5, rtol=1e-5), torch.float16: dict(atol=1e-2, rtol=1e-2),
           torch.bfloat16: dict(atol=6e-2, rtol=6e-2)}[dtype]
    for w_dtype, f32 in ((torch.float32, True), (dtype, False)):
        h, d = torch.randn(4, 40).to(dtype), (5 * torch.randn(4, 40)).to(dtype)
        w, dw = (torch.rand(40) + 0.5).to(w_dtype), (torch.rand(40) + 0.5).to(w_dtype)
        got = fast_add(h, d, w, 1e-6, multiply_in_float32=f32, delta_weight=dw, delta_eps=1e-5)
        want = ref_add(h, d, w, 1e-6, multiply_in_float32=f32, delta_weight=dw, delta_eps=1e-5)
        for a, b, what in zip(got, want, ("h", "normed")):
            try:
                torch.testing.assert_close(a, b, **tol)
            except AssertionError as err:
                bad.append(f"add_rms_norm with the delta's norm, {dtype} weight {w_dtype}: {what}: {err}")
    # a MoE without a shared expert: (None, routed per assignment [T, k, H]), summed in the same launch
    h, routed = torch.randn(4, 40).to(dtype), torch.randn(4, 3, 40).to(dtype)
    w = (torch.rand(40) + 0.5).to(dtype)
    for got, want, what in zip(fast_add(h, (None, routed), w, 1e-6), ref_add(h, (None, routed), w, 1e-6), "hy"):
        try:
            torch.testing.assert_close(got, want, **tol)
        except AssertionError as err:
            bad.append(f"add_rms_norm of routed parts alone, {dtype}: {what}: {err}")
print("ok" if not bad else "\\n".join(bad)[:3000])
"""


def test_triton_rms_norm_matches_the_reference_interpreted():
    assert_interpreted_ok(_INTERPRETED, timeout=300)


_LAUNCHES = """
import torch
from triton.runtime.interpreter import InterpretedFunction
from bringup.kernels.triton.norms import rms_norm as fast
launches = []
run = InterpretedFunction.run
InterpretedFunction.run = lambda fn, *a, **k: (launches.append(fn.__name__), run(fn, *a, **k))[1]
x = torch.randn(4, 3, 16, dtype=torch.bfloat16)
fast(x, torch.ones(16), 1e-6, multiply_in_float32=True)  # Gemma's post norm: one launch
fast(x.transpose(0, 1), torch.ones(16), 1e-6, multiply_in_float32=True)  # no [N, H] view: the reference
print(launches)
"""


def test_a_norm_of_rows_is_one_launch_and_other_layouts_take_the_reference():
    assert run_interpreted(_LAUNCHES).strip() == "['_add_rms_norm_kernel']"


def test_reference_add_of_a_gated_shared_part_is_the_models_sum():
    g = torch.Generator().manual_seed(2)
    h, shared = torch.randn(3, 16, generator=g).bfloat16(), torch.randn(3, 16, generator=g).bfloat16()
    routed, gate = torch.randn(3, 2, 16, generator=g).bfloat16(), torch.randn(3, 1, generator=g).bfloat16()
    new, _ = add_rms_norm(h, (shared, routed, gate), torch.ones(16), 1e-6)
    assert torch.equal(new, h + (torch.sigmoid(gate) * shared + routed.sum(1)))


_GATED_SHARED = """
import torch
from bringup.kernels.reference import add_rms_norm as ref
from bringup.kernels.triton.norms import add_rms_norm as fast
torch.manual_seed(0)
bad = []
for dtype in (torch.float32, torch.bfloat16, torch.float16):
    tol = {torch.float32: dict(atol=1e-5, rtol=1e-5), torch.float16: dict(atol=1e-2, rtol=1e-2),
           torch.bfloat16: dict(atol=6e-2, rtol=6e-2)}[dtype]
    h, shared, routed = torch.randn(4, 40).to(dtype), torch.randn(4, 40).to(dtype), torch.randn(4, 3, 40).to(dtype)
    both = (3 * torch.randn(4, 9)).to(dtype)  # a stacked router's product: the gate is its last column
    w = (torch.rand(40) + 0.5).to(dtype)
    for parts in ((shared, routed, both[:, -1:]), (shared, routed[:, 0], both[:, -1:])):
        for got, want, what in zip(fast(h, parts, w, 1e-6), ref(h, parts, w, 1e-6), "hy"):
            try:
                torch.testing.assert_close(got, want, **tol)
            except AssertionError as err:
                bad.append(f"gated shared part, {dtype} routed {tuple(parts[1].shape)}: {what}: {err}")
print("ok" if not bad else "\\n".join(bad)[:3000])
"""


def test_triton_add_rms_norm_scales_a_gated_shared_part_interpreted():
    assert_interpreted_ok(_GATED_SHARED)



def test_triton_add_rms_norm_with_a_gated_shared_part_on_a_gpu():
    from bringup.kernels.triton import availability

    gpu = next((d for d in availability.GPU_DEVICE_TYPES if availability.triton_reason(d) is None), None)
    if gpu is None:
        pytest.skip("no device for the Triton kernels")
    from bringup.kernels.triton.norms import add_rms_norm as fast

    h, shared = torch.randn(3, 2048, device=gpu).bfloat16(), torch.randn(3, 2048, device=gpu).bfloat16()
    routed, both = torch.randn(3, 10, 2048, device=gpu).bfloat16(), torch.randn(3, 513, device=gpu).bfloat16()
    w = (torch.rand(2048, device=gpu) + 0.5).bfloat16()
    parts = (shared, routed, both[:, -1:])
    for got, want in zip(fast(h, parts, w, 1e-6), add_rms_norm(h, parts, w, 1e-6)):
        torch.testing.assert_close(got, want, rtol=2e-2, atol=6e-2)
