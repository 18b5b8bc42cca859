"""The delta-rule gates (beta = sigmoid(b), g = -exp(A_log) * softplus(a + dt_bias)): the reference
(kernels/reference/delta_rule_gates.py) equals the lines the two models computed before (gated
DeltaNet: g [T, H], beta in b's dtype; KDA: g [T, H, D] with A_log per head, beta in float32), and the
Triton kernel (kernels/triton/delta_rule_gates.py) equals the reference under Triton's interpreter
(strided a and b, heads not a power of two, softplus past its threshold and far below zero) in one
launch, and on a GPU at Qwen3-Next's and Kimi-Linear's shapes."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from bringup.kernels.reference import delta_rule_gates
from triton_interpreter import assert_interpreted_ok
from test_kernels_gpu import GPU, needs_triton


def test_reference_is_the_gated_delta_nets_lines():
    gen = torch.Generator().manual_seed(0)
    a, b = (torch.randn(5, 6, generator=gen) * 4).bfloat16(), torch.randn(5, 6, generator=gen).bfloat16()
    A_log, dt_bias = torch.randn(6, generator=gen), torch.randn(6, generator=gen)
    g, beta = delta_rule_gates(a, b, A_log, dt_bias, b.dtype)
    assert torch.equal(beta, b.sigmoid()) and beta.dtype == torch.bfloat16
    assert torch.equal(g, -A_log.float().exp() * F.softplus(a.float() + dt_bias.float())) and g.dtype == torch.float32


def test_reference_is_the_kda_lines():
    gen = torch.Generator().manual_seed(1)
    T, H, D = 3, 4, 8
    f_b, b = (torch.randn(T, H * D, generator=gen) * 4).bfloat16(), torch.randn(T, H, generator=gen).bfloat16()
    A_log, dt_bias = torch.randn(1, 1, H, 1, generator=gen), torch.randn(H * D, generator=gen)
    g, beta = delta_rule_gates(f_b.view(T, H, D), b, A_log, dt_bias, torch.float32)
    decay = f_b.float() + dt_bias.float()
    assert torch.equal(g, -A_log.float().exp().view(H, 1) * F.softplus(decay.view(T, H, D)))
    assert torch.equal(beta, b.float().sigmoid()) and beta.dtype == torch.float32


_INTERPRETED = """
import torch
from bringup.core.bench.launch_count import LaunchCounter
from bringup.kernels.reference import delta_rule_gates as ref
from bringup.kernels.triton import delta_rule_gates as fast
torch.manual_seed(0)
bad = []
for T, H, D, dtype, beta_dtype, block in [(4, 6, 1, torch.bfloat16, torch.bfloat16, 1024),
                                          (3, 5, 1, torch.float32, None, 1024),
                                          (3, 5, 12, torch.bfloat16, torch.float32, 1024),
                                          (2, 3, 40, torch.float32, torch.float32, 32)]:  # rows in 4 programs
    fast.BLOCK_MAX = block
    wide = (torch.randn(T, H * D + 2 * H + 3) * 6).to(dtype)  # a and b as strided views of one product
    wide[0, :4] = torch.tensor([30.0, -30.0, 19.9, -90.0]).to(dtype)  # softplus' threshold, tiny decays
    a = wide[:, :H * D].view(T, H, D) if D > 1 else wide[:, :H]
    b = wide[:, H * D + H:H * D + 2 * H]
    A_log = torch.randn(1, 1, H, 1) if D > 1 else torch.randn(H)
    dt_bias = torch.randn(H * D)
    with LaunchCounter() as launches:
        g, beta = fast.delta_rule_gates(a, b, A_log, dt_bias, beta_dtype)
    want_g, want_beta = ref(a, b, A_log, dt_bias, beta_dtype)
    what = f"T={T} H={H} D={D} {dtype} beta {beta_dtype}"
    try:
        assert g.shape == want_g.shape and g.dtype == torch.float32 and beta.dtype == want_beta.dtype
        torch.testing.assert_close(g, want_g, atol=1e-30, rtol=2e-6)  # (relative: the tiny decays too)
        # (a bf16 beta: the interpreter truncates where torch rounds to nearest)
        tol = dict(atol=1e-2, rtol=1e-2) if beta.dtype == torch.bfloat16 else dict(atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(beta, want_beta, **tol)
        assert dict(launches.counts) == {"triton:_gates_kernel": 1}, launches.counts
    except AssertionError as err:
        bad.append(f"{what}: {err}")
print("ok" if not bad else "\\n".join(bad)[:3000])
"""


def test_gates_kernel_matches_the_reference_interpreted():
    assert_interpreted_ok(_INTERPRETED, timeout=120)


@needs_triton
@pytest.mark.parametrize("model,T,H,D,beta_dtype", [("Qwen3-Next", 1, 32, 1, torch.bfloat16),
                                                    ("Qwen3-Next", 128, 32, 1, torch.bfloat16),
                                                    ("Kimi-Linear", 1, 32, 128, torch.float32),
                                                    ("Kimi-Linear", 128, 32, 128, torch.float32)])
def test_gates_at_real_shapes_match_the_reference_on_the_gpu(model, T, H, D, beta_dtype):
    from bringup.kernels.triton.delta_rule_gates import delta_rule_gates as fast

    a = (torch.randn(T, H, D, device=GPU) * 4).bfloat16().squeeze(-1)
    b = torch.randn(T, H, device=GPU).bfloat16()
    A_log = torch.randn(1, 1, H, 1, device=GPU) if D > 1 else torch.randn(H, device=GPU)
    dt_bias = torch.randn(H * D, device=GPU)
    g, beta = fast(a, b, A_log, dt_bias, beta_dtype)
    want_g, want_beta = delta_rule_gates(a, b, A_log, dt_bias, beta_dtype)
    torch.testing.assert_close(g, want_g, atol=1e-30, rtol=1e-5, msg=lambda m: f"{model} g: {m}")
    torch.testing.assert_close(beta, want_beta, atol=1e-2 if beta_dtype == torch.bfloat16 else 1e-6, rtol=1e-5,
                               msg=lambda m: f"{model} beta: {m}")
