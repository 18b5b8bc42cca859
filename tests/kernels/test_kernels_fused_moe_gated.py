"""The gated MoE (SwiGLU and gpt-oss's clamped SwiGLU on interleaved gate/up, with biases) and
gpt-oss's router: the references against a per-token loop, the Triton kernels against the references
under Triton's interpreter (CPU; it needs numpy < 2.3 for loops with run-time bounds)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from bringup.kernels.reference.moe_gated_experts import (every_expert, gated_activation, moe_gated_experts,
                                                          moe_gated_experts_unsummed,
                                                          router_topk_softmax)
from triton_interpreter import assert_interpreted_ok


def _gpt_oss_experts(E=6, H=24, I=20, seed=0):
    """gpt-oss's stored layout: gate_up [E, H, 2I] interleaved, down [E, I, H] (x @ W), with biases;
    returned as the [E, I, H] / [E, H, I] views the op takes."""
    g = torch.Generator().manual_seed(seed)
    gate_up = torch.randn(E, H, 2 * I, generator=g) / H ** 0.5
    gate_up_bias = torch.randn(E, 2 * I, generator=g) * 0.1
    down = torch.randn(E, I, H, generator=g) / I ** 0.5
    down_bias = torch.randn(E, H, generator=g) * 0.1
    return (gate_up[..., ::2].transpose(1, 2), gate_up[..., 1::2].transpose(1, 2), down.transpose(1, 2),
            gate_up_bias[:, ::2], gate_up_bias[:, 1::2], down_bias), (gate_up, gate_up_bias, down, down_bias)


def _per_token(x, weights, ids, stored, alpha, limit):
    """gpt-oss's experts as transformers writes them, one token and slot at a time, on the stored tensors."""
    gate_up, gate_up_bias, down, down_bias = stored
    out = torch.zeros_like(x)
    for t in range(x.shape[0]):
        for j in range(ids.shape[1]):
            e = int(ids[t, j])
            gu = x[t] @ gate_up[e] + gate_up_bias[e]
            gate, up = gu[::2].clamp(max=limit), gu[1::2].clamp(-limit, limit)
            y = ((up + 1) * gate * torch.sigmoid(gate * alpha)) @ down[e] + down_bias[e]
            out[t] += weights[t, j] * y
    return out


def test_reference_gated_experts_are_gpt_oss_experts_on_the_interleaved_views():
    views, stored = _gpt_oss_experts()
    x = torch.randn(7, 24, dtype=torch.float64).float()
    logits = torch.randn(7, 6)
    top, ids = logits.topk(3, dim=-1)
    weights = torch.softmax(top, -1)
    gate, up, down, gb, ub, db = views
    got = moe_gated_experts(x, weights, ids, gate, up, down, "swiglu_clamped", gb, ub, db, 1.702, 7.0)
    want = _per_token(x, weights, ids, stored, 1.702, 7.0)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    # the graph-safe form (every expert on every token) gives the same sum
    dense = every_expert(x, weights, ids, gate, up, down, gb, ub, db, "swiglu_clamped", 1.702, 7.0)
    torch.testing.assert_close(dense, want, rtol=1e-5, atol=1e-5)
    # the unsummed form: each (token, slot)'s weighted output, which sum to the same over the slots
    parts = moe_gated_experts_unsummed(x, weights, ids, gate, up, down, "swiglu_clamped", gb, ub, db, 1.702, 7.0)
    assert parts.shape == (7, 3, 24)
    torch.testing.assert_close(parts.sum(1), want, rtol=1e-5, atol=1e-5)


def test_gated_activations():
    g, u = torch.tensor([-9.0, 0.5, 9.0]), torch.tensor([-9.0, 0.25, 9.0])
    torch.testing.assert_close(gated_activation("silu", g, u), torch.nn.functional.silu(g) * u)
    clamped = gated_activation("swiglu_clamped", g, u, alpha=1.5, limit=7.0)
    gc, uc = torch.tensor([-9.0, 0.5, 7.0]), torch.tensor([-7.0, 0.25, 7.0])
    torch.testing.assert_close(clamped, (uc + 1) * gc * torch.sigmoid(1.5 * gc))
    with pytest.raises(ValueError, match="unsupported gated expert activation"):
        gated_activation("relu2", g, u)


def test_reference_router_is_softmax_over_the_top_k_raw_logits():
    g = torch.Generator().manual_seed(1)
    h, w, b = torch.randn(5, 16, generator=g).bfloat16(), torch.randn(8, 16, generator=g), torch.randn(8, generator=g)
    weights, ids = router_topk_softmax(h, w, b, 3)
    logits = h.float() @ w.T + b
    assert torch.equal(ids, logits.topk(3, -1).indices)
    torch.testing.assert_close(weights, torch.softmax(logits.gather(1, ids), -1))
    assert weights.dtype == torch.float32


_INTERPRETED = """
import torch
from bringup.kernels.reference.moe_gated_experts import moe_gated_experts as ref_experts, router_topk_softmax as ref_router
from bringup.kernels.reference.moe_gated_experts import moe_gated_experts_unsummed as ref_parts
from bringup.kernels.triton import fused_moe_gated as fast
torch.manual_seed(0)
worst = 0.0
def rel(a, b):
    return float((a.float() - b.float()).norm() / b.float().norm().clamp_min(1e-12))
E, H, I = 6, 40, 36
gate_up = torch.randn(E, H, 2 * I) / H ** 0.5
gub, down, db = torch.randn(E, 2 * I) * 0.1, torch.randn(E, I, H) / I ** 0.5, torch.randn(E, H) * 0.1
interleaved = (gate_up[..., ::2].transpose(1, 2), gate_up[..., 1::2].transpose(1, 2), down.transpose(1, 2))
separate = (torch.randn(E, I, H) / H ** 0.5, torch.randn(E, I, H) / H ** 0.5, torch.randn(E, H, I) / I ** 0.5)
from bringup.kernels.triton import gate_up_layout
assert gate_up_layout.interleaved(*interleaved[:2]) and not gate_up_layout.interleaved(*separate[:2])
# split up to 4 tokens, then grouped (the GEMV lost on the H200 at every size), sorted past 8 rows per expert
assert [fast.decode_form(T, k, E) for T, k in [(1, 2), (4, 4), (5, 2), (24, 2), (25, 2)]] == [
    "split", "split", "grouped", "grouped", "sorted"]
runs = [((T, k), form, True) for T, k in [(1, 2), (8, 4), (32, 4)] for form in fast.FORMS]  # (32, 4): > 16 rows
runs += [((3, 4), None, True), ((21, 2), None, True), ((1, 2), "gemv", False), ((8, 4), "grouped", False),
         ((21, 2), "sorted", False)]
for (T, k), form, as_one in runs:
    fast.FORM_OVERRIDE.clear()
    fast.FORM_OVERRIDE.update({"form": form} if form else {})  # None: the form the shapes choose
    gate_up_layout.READ_AS_ONE = as_one  # the interleaved gate/up read as one tensor, or through its two views
    x = torch.randn(T, H)
    top, ids = torch.randn(T, E).topk(k, -1)
    w = torch.softmax(top, -1)
    cases = [(interleaved, "swiglu_clamped", (gub[:, ::2], gub[:, 1::2], db), 1.702, 7.0),
             (interleaved, "swiglu_clamped", (None, None, None), 1.5, None),
             (separate, "silu", (None, None, None), 1.702, None)]
    for (g, u, d), act, (bg, bu, bd), alpha, limit in cases:
        want = ref_experts(x, w, ids, g, u, d, act, bg, bu, bd, alpha, limit)
        got = fast.moe_gated_experts(x, w, ids, g, u, d, act, bg, bu, bd, alpha, limit)
        worst = max(worst, rel(got, want))
        parts = fast.moe_gated_experts_unsummed(x, w, ids, g, u, d, act, bg, bu, bd, alpha, limit)
        assert parts.shape == (T, k, H)
        worst = max(worst, rel(parts, ref_parts(x, w, ids, g, u, d, act, bg, bu, bd, alpha, limit)))
    hb, rw, rb = torch.randn(T, H).bfloat16(), torch.randn(E, H), torch.randn(E)
    for b in (rb, None):
        (wr, ir), (wf, iff) = ref_router(hb, rw, b, k), fast.router_topk_softmax(hb, rw, b, k)
        assert torch.equal(ir, iff), (ir, iff)
        worst = max(worst, rel(wf, wr))
# tf32-free interpreter: float32 products, so only summation order differs
print("ok" if worst < 1e-4 else f"worst relative error {worst}")
"""


def test_triton_gated_moe_and_router_match_references_interpreted():
    """Each form (GEMV, expert by expert, sorted) at 1, 8 and 32 tokens (one assignment per expert hit,
    several, more than a row block), the chosen one at 3 and 21, on interleaved (gpt-oss, with and without biases and limit;
    read as one tensor and through its two strided views) and separate (SwiGLU) gate/up; which form the
    shapes choose; the router with and without bias."""
    assert_interpreted_ok(_INTERPRETED, timeout=600)


_LAYOUT = """
import torch
from bringup.kernels.triton.gate_up_layout import interleaved
gate_up, down = torch.randn(4, 8, 12), torch.randn(4, 6, 8)
gate, up = gate_up[..., ::2].transpose(1, 2), gate_up[..., 1::2].transpose(1, 2)
assert interleaved(gate, up)
assert not interleaved(up, gate)  # up then gate: gate is not the even columns
assert not interleaved(gate, gate_up[..., 2::2].transpose(1, 2))  # two columns apart
assert not interleaved(gate.contiguous(), up.contiguous())  # two tensors of their own
assert not interleaved(gate.double(), up.double())
assert not interleaved(gate, down.transpose(1, 2))
print("ok")
"""


def test_interleaved_gate_up_is_found_only_where_up_is_gate_shifted_by_one():
    """(In a child: the module needs triton, and this process must load no kernel module without a GPU.)"""
    pytest.importorskip("triton")
    done = subprocess.run([sys.executable, "-c", _LAYOUT], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", (done.stdout[-500:], done.stderr[-3000:])


_SWIGLU_MOE = """
import torch
from bringup.core.bench.launch_count import LaunchCounter
from bringup.kernels.reference import moe_experts as ref_experts
from bringup.kernels.triton import fused_moe
torch.manual_seed(0)
E, H, I, k = 16, 32, 24, 4
up, gate, down = torch.randn(E, I, H) / H ** 0.5, torch.randn(E, I, H) / H ** 0.5, torch.randn(E, H, I) / I ** 0.5
for T in (1, 8, 32):
    x = torch.randn(T, H)
    top, ids = torch.randn(T, E).topk(k, -1)
    w = torch.softmax(top, -1)
    with LaunchCounter() as c:
        got = fused_moe.moe_experts(x, w, ids, up, down, gate, "silu")
        parts = fused_moe.moe_experts_unsummed(x, w, ids, up, down, gate, "silu")
    assert all(name.startswith("triton:") for name in c.counts if "sum" not in name), c.counts
    want = ref_experts(x, w, ids, up, down, gate, "silu")
    for out in (got, parts.sum(1)):
        assert float((out - want).norm() / want.norm()) < 1e-5, T
print("ok")
"""


def test_fused_moe_sends_swiglu_experts_to_the_fused_gated_moe_interpreted():
    """moe_experts with a gate and SiLU (Kimi-Linear, Jamba, MiniMax call it so) runs the gated kernels,
    no reference op, and matches the reference at 1, 8 and 32 tokens."""
    assert_interpreted_ok(_SWIGLU_MOE, timeout=600)


def _gpu():
    from bringup.kernels.triton import availability

    return next((d for d in availability.GPU_DEVICE_TYPES if availability.triton_reason(d) is None), None)


GPU = _gpu()


@pytest.mark.skipif(GPU is None, reason="no device for the Triton kernels")
@pytest.mark.parametrize("T", [1, 4, 8, 16, 32, 300])
def test_triton_gated_moe_at_gpt_oss_shapes_matches_reference(T):
    """gpt-oss-20b's experts (32 of 2880 x 2880, top 4) in bf16, stored interleaved, against the
    reference in float64 (1 and 4: split over the SMs; 8 to 32: expert by expert; 300: sorted); the router on
    its float32 weights."""
    from bringup.kernels.triton import fused_moe_gated as fast

    E, H, I, k = 32, 2880, 2880, 4
    g = torch.Generator(device=GPU).manual_seed(T)
    gate_up = (torch.randn(E, H, 2 * I, device=GPU, generator=g) / H ** 0.5).bfloat16()
    gub = (torch.randn(E, 2 * I, device=GPU, generator=g) * 0.1).bfloat16()
    down = (torch.randn(E, I, H, device=GPU, generator=g) / I ** 0.5).bfloat16()
    db = (torch.randn(E, H, device=GPU, generator=g) * 0.1).bfloat16()
    x = torch.randn(T, H, device=GPU, generator=g).bfloat16()
    rw, rb = torch.randn(E, H, device=GPU, generator=g) / H ** 0.5, torch.randn(E, device=GPU, generator=g)
    w, ids = fast.router_topk_softmax(x, rw, rb, k)
    w_ref, ids_ref = router_topk_softmax(x, rw, rb, k)
    assert torch.equal(ids, ids_ref)
    torch.testing.assert_close(w, w_ref, rtol=1e-4, atol=1e-5)
    views = (gate_up[..., ::2].transpose(1, 2), gate_up[..., 1::2].transpose(1, 2), down.transpose(1, 2))
    got = fast.moe_gated_experts(x, w, ids, *views, "swiglu_clamped", gub[:, ::2], gub[:, 1::2], db, 1.702, 7.0)
    want = moe_gated_experts(x.double(), w.double(), ids, *(v.double() for v in views), "swiglu_clamped",
                             gub[:, ::2].double(), gub[:, 1::2].double(), db.double(), 1.702, 7.0)
    assert got.dtype == torch.bfloat16 and torch.isfinite(got).all()
    assert float((got.double() - want).norm() / want.norm()) < 1e-2
