"""A recurrent state's tolerance in a calibrated A/B: a state that differs from the bf16 reference's
by the fast chunked scan's own rounding (each term of the sum over the tokens rounded to bf16 before
a float32 accumulation, as fla's chunk_fwd_kernel_h does) is within; an off-by-one state update is not.
The states are a Mamba2 recurrence whose tokens mostly cancel, where the sum's condition number makes
bf16's distance from float32 many roundoffs (as on the H200: 2.8e-2 for the reference, 3.9e-2 fast)."""

from __future__ import annotations

import torch

from bringup.core.compare.divergence import compare_traces, describe
from bringup.core.compare.precision import KERNEL_ROUNDOFFS, STATE_NOISE_FACTOR, roundoff

BF = torch.bfloat16
T, H, P, N, CHUNK = 96, 4, 16, 16, 64


def inputs(seed: int, spread: float = 0.05):
    """Tokens of alternating sign around one direction plus `spread` of their own: a sum that cancels."""
    g = torch.Generator().manual_seed(seed)
    x, B = torch.randn(T, H, P, generator=g), torch.randn(T, N, generator=g)
    dt, A = torch.rand(T, H, generator=g) * 0.1 + 0.01, -torch.rand(H, generator=g) * 0.5
    g = torch.Generator().manual_seed(100 + seed)
    sign = torch.tensor([(-1.0) ** t for t in range(T)])
    return sign[:, None, None] * torch.randn(1, H, P, generator=g) + spread * x, torch.randn(1, N, generator=g) + spread * B, dt, A


def sequential(x, B, dt, A, tokens: int = T):
    """S_t = exp(dt_t A) S_{t-1} + dt_t x_t B_t^T in float64, token by token."""
    x, B, dt = x.double(), B.double(), dt.double()
    S = torch.zeros(H, P, N, dtype=torch.float64)
    for t in range(tokens):
        S = torch.exp(dt[t] * A.double())[:, None, None] * S + dt[t][:, None, None] * x[t][:, :, None] * B[t][None, None]
    return S.float()


def chunked_bf16(x, B, dt, A):
    """fla's order and rounding: v = x dt in bf16, per chunk the decay-weighted v in bf16 again, the
    products and the carried state in float32."""
    v = (x.to(BF).float() * dt[..., None]).to(BF)
    Bb, g = B.to(BF).float(), dt * A[None]
    S = torch.zeros(H, P, N)
    for c in range(0, T, CHUNK):
        cum = torch.cumsum(g[c:c + CHUNK], 0)
        vd = (v[c:c + CHUNK].float() * torch.exp(cum[-1][None] - cum)[..., None]).to(BF).float()
        S = S * torch.exp(cum[-1])[:, None, None] + torch.einsum("thp,tn->hpn", vd, Bb[c:c + CHUNK])
    return S


def one_step(state, dtype: str) -> dict:
    step = {"kind": "prefill", "sampled": 1, "blocks": {}, "conv": {0: torch.zeros(8, 3)}, "ssm": {0: state}}
    return {"steps": [step], "layers": [(0, "mamba", "none")], "dtype": dtype}


def judged(a, noise, b, factor):
    return compare_traces(a, b, noise=compare_traces(a, noise), extra=KERNEL_ROUNDOFFS * roundoff("bfloat16"),
                          calibration="bf16 reference kernels", noise_name="bf16 noise", state_factor=factor)


def test_a_chunked_bf16_state_is_within_and_an_off_by_one_update_is_not():
    x, B, dt, A = inputs(39)
    a = one_step(sequential(x, B, dt, A), "float32")
    xb, Bb = x.to(BF).float(), B.to(BF).float()
    reference = one_step(sequential(xb, Bb, dt, A), "bfloat16")  # bf16 inputs, float32 arithmetic
    fast = one_step(chunked_bf16(x, B, dt, A), "bfloat16")
    noise = compare_traces(a, reference).state_errors[(0, 0, "ssm")]
    assert noise > 5 * roundoff("bfloat16")  # the cancelling sum: bf16's distance is ~7 roundoffs, not ~1
    before = judged(a, reference, fast, 1.0)  # the additive rule alone calls the fast scan's rounding a fault
    assert before.first_state is not None and before.first_state.rule == "bf16 noise + 7.8e-03"
    after = judged(a, reference, fast, STATE_NOISE_FACTOR)
    assert after.first_state is None and after.first is None and "matches" in describe(after)
    assert noise < after.state_errors[(0, 0, "ssm")] < STATE_NOISE_FACTOR * noise
    behind = one_step(sequential(xb, Bb, dt, A, tokens=T - 1), "bfloat16")  # the last token's update missed
    d = judged(a, reference, behind, STATE_NOISE_FACTOR)
    assert (d.first_state.step, d.first_state.block, d.first_state.what) == (0, 0, "ssm state")
    assert d.first_state.rule == "4 x bf16 noise" and d.first_state.rel_err > 10 * d.first_state.tolerance
    assert "4 x bf16 noise" in describe(d)


def test_the_fast_scans_distance_is_a_bounded_multiple_of_the_references():
    """Over many draws the fast scan's distance from float32 is about sqrt(2) times the reference's
    (as many independent roundings again) and stays under STATE_NOISE_FACTOR times it."""
    ratios = []
    for seed in range(12):
        x, B, dt, A = inputs(seed)
        a = sequential(x, B, dt, A).double()
        ref = sequential(x.to(BF).float(), B.to(BF).float(), dt, A).double()
        fast = chunked_bf16(x, B, dt, A).double()
        ratios.append(((fast - a).norm() / (ref - a).norm()).item())
    ratios.sort()
    assert 1.2 < ratios[len(ratios) // 2] < 1.7 and ratios[-1] < STATE_NOISE_FACTOR
