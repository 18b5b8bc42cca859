"""The gated group-wise RMSNorm's forms: silu (Mamba2, gated DeltaNet) or sigmoid gates (KDA), the norm
before or after the gate, rounded to the dtype before the products (Mamba2's order) or all in float32
(multiply_in_float32: KDA's o_norm, the checkpoint's FusedRMSNormGated). The reference's float32
sigmoid form is what Kimi-Linear computed by hand before; the Triton kernel (kernels/triton/norms.py)
matches the reference in every form under Triton's interpreter."""

from __future__ import annotations

import pytest
import torch

from bringup.kernels.reference import gated_rms_norm
from triton_interpreter import assert_interpreted_ok


def test_float32_sigmoid_form_is_kdas_norm_then_gate():
    g = torch.Generator().manual_seed(0)
    y, gate = torch.randn(6, 16, generator=g).bfloat16(), torch.randn(6, 16, generator=g).bfloat16()
    w = (torch.rand(16, generator=g) + 0.5).bfloat16()
    got = gated_rms_norm(y, gate, w, 1e-5, 8, norm_before_gate=True, activation="sigmoid", multiply_in_float32=True)
    yf = y.float().view(6, 2, 8)
    yf = (yf * torch.rsqrt(yf.pow(2).mean(-1, keepdim=True) + 1e-5)).view(6, 16) * w.float()
    want = (yf * gate.float().sigmoid()).to(torch.bfloat16)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got, want, rtol=8e-3, atol=1e-5)  # one bf16 step where the rsqrt rounds apart


def test_unknown_activation_is_refused():
    x = torch.ones(2, 4)
    with pytest.raises(ValueError, match="activation"):
        gated_rms_norm(x, x, torch.ones(4), 1e-5, 4, activation="gelu")


_INTERPRETED = """
import torch
from bringup.kernels.reference import gated_rms_norm as ref
from bringup.kernels.triton.norms import gated_rms_norm as fast
torch.manual_seed(0)
bad = []
for dtype in (torch.float32, torch.bfloat16, torch.float16):
    tol = {torch.float32: dict(atol=1e-5, rtol=1e-5), torch.float16: dict(atol=2e-3, rtol=2e-3),
           torch.bfloat16: dict(atol=2e-2, rtol=2e-2)}[dtype]
    x, z = (2 * torch.randn(5, 48)).to(dtype), (2 * torch.randn(5, 48)).to(dtype)
    w = (torch.rand(48) + 0.5).to(dtype)
    for act in ("silu", "sigmoid"):
        for before in (True, False):
            for f32 in (True, False):
                got = fast(x, z, w, 1e-5, 16, norm_before_gate=before, activation=act, multiply_in_float32=f32)
                want = ref(x, z, w, 1e-5, 16, norm_before_gate=before, activation=act, multiply_in_float32=f32)
                try:
                    assert got.dtype == want.dtype and got.shape == want.shape
                    torch.testing.assert_close(got, want, **tol)
                except AssertionError as err:
                    bad.append(f"{dtype} {act} before={before} f32={f32}: {err}")
assert not bad, bad
print("ok")
"""


def test_triton_gated_rms_norm_matches_the_reference_in_every_form_interpreted():
    assert_interpreted_ok(_INTERPRETED)


def test_triton_gated_rms_norm_on_a_gpu_at_kda_shapes():
    from bringup.kernels.triton import availability

    gpu = next((d for d in availability.GPU_DEVICE_TYPES if availability.triton_reason(d) is None), None)
    if gpu is None:
        pytest.skip("no device for the Triton kernels")
    from bringup.kernels.triton.norms import gated_rms_norm as fast

    x, z = torch.randn(4 * 32, 128, device=gpu).bfloat16(), torch.randn(4 * 32, 128, device=gpu).bfloat16()
    w = (torch.rand(128, device=gpu) + 0.5).bfloat16()
    for act in ("silu", "sigmoid"):
        for f32 in (True, False):
            got = fast(x, z, w, 1e-5, 128, norm_before_gate=True, activation=act, multiply_in_float32=f32)
            want = gated_rms_norm(x, z, w, 1e-5, 128, norm_before_gate=True, activation=act, multiply_in_float32=f32)
            torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)
