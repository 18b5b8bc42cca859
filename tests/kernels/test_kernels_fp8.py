"""Block-scaled fp8 weights: the references (CPU), and the Triton kernels against them (GPU).

The references are checked against first principles: quantising and dequantising a matrix returns
it within fp8's rounding, and the fp8 linear / fused MoE equal the bf16 ones on the dequantised
weights. The Triton kernels (W8A16) must then equal the references."""

from __future__ import annotations

import pytest
import torch

from bringup.kernels import reference as ref
from bringup.kernels.reference.fp8_linear import (PER_TENSOR_BLOCK, dequantize_fp8_block, quantize_fp8_block,
                                                  scale_shape)
from bringup.kernels.reference.moe_experts import moe_experts_unsummed
from triton_interpreter import assert_interpreted_ok

# fp8 e4m3 keeps 3 mantissa bits: one rounding is at most 2^-4 of the value.
FP8_ROUNDING = 2.0**-4


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def rel(a, b) -> float:
    return ((a.float() - b.float()).abs().max() / b.float().abs().max().clamp(min=1e-6)).item()


@pytest.mark.parametrize("shape, block", [((256, 384), (128, 128)), ((300, 200), (128, 128)),
                                          ((3, 130, 96), (64, 32)), ((70, 50), PER_TENSOR_BLOCK)])
def test_quantize_round_trip_within_fp8_rounding(shape, block):
    w = torch.randn(shape) * 0.02
    q, s = quantize_fp8_block(w, block)
    assert q.dtype == torch.float8_e4m3fn and q.shape == w.shape
    if block != PER_TENSOR_BLOCK:
        assert s.shape == scale_shape(shape, block)
    else:
        assert s.shape == (1, 1)
    back = dequantize_fp8_block(q, s, block)
    # (below e4m3's smallest normal the spacing is absolute: 2^-9 of a scale unit)
    assert ((back - w).abs() <= FP8_ROUNDING * w.abs() + 2.0**-9 * s.max()).all()


def test_each_block_has_its_own_scale():
    w = torch.randn(256, 256)
    w[:128, :128] *= 1000  # one loud block must not flatten the others
    q, s = quantize_fp8_block(w, (128, 128))
    assert s[0, 0] > 100 * s[1, 1]
    assert rel(dequantize_fp8_block(q, s, (128, 128))[128:, 128:], w[128:, 128:]) < FP8_ROUNDING


@pytest.mark.parametrize("rows", [1, 5, 33])
def test_fp8_linear_reference_is_the_dequantised_linear(rows, monkeypatch):
    import sys

    module = sys.modules["bringup.kernels.reference.fp8_linear"]
    monkeypatch.setattr(module, "ROWS_PER_CHUNK", 128)  # several slabs, one ragged
    w, b = torch.randn(300, 256) * 0.05, torch.randn(300)
    q, s = quantize_fp8_block(w, (128, 128))
    x = torch.randn(rows, 256)
    expected = torch.nn.functional.linear(x.double(), dequantize_fp8_block(q, s, (128, 128)).double(), b.double())
    got = ref.fp8_linear(x, q, s, (128, 128), b)
    assert got.shape == (rows, 300) and got.dtype == x.dtype
    assert rel(got, expected) < 1e-5


def test_moe_fp8_reference_is_the_dequantised_moe():
    E, I, H, T, k = 6, 64, 96, 7, 2
    up, down = torch.randn(E, I, H) * 0.1, torch.randn(E, H, I) * 0.1
    (uq, us), (dq, ds) = quantize_fp8_block(up, (32, 32)), quantize_fp8_block(down, (32, 32))
    x = torch.randn(T, H)
    ids = torch.stack([torch.randperm(E)[:k] for _ in range(T)])
    weights = torch.rand(T, k)
    expected = moe_experts_unsummed(x, weights, ids, dequantize_fp8_block(uq, us, (32, 32)),
                                    dequantize_fp8_block(dq, ds, (32, 32)), None, "relu2", "sorted")
    got = ref.moe_experts_fp8(x, weights, ids, uq, us, dq, ds, "relu2", (32, 32))
    assert got.shape == (T, k, H)
    assert rel(got, expected) < 1e-5


def test_moe_shared_fp8_reference_is_the_dequantised_layer():
    """The shared expert (S*I wide, here not a multiple of the block) plus the routed experts, as the
    bf16 layer on the dequantised weights computes them."""
    from bringup.kernels.reference.moe_shared import moe_experts_shared_unsummed

    E, I, H, T, k, S, block = 6, 48, 96, 5, 2, 2, (32, 32)
    up, down = torch.randn(E, I, H) * 0.1, torch.randn(E, H, I) * 0.1
    su, sd = torch.randn(S * I, H) * 0.1, torch.randn(H, S * I) * 0.1
    (uq, us), (dq, ds), (suq, sus), (sdq, sds) = (quantize_fp8_block(w, block) for w in (up, down, su, sd))
    x = torch.randn(T, H)
    ids, weights = torch.stack([torch.randperm(E)[:k] for _ in range(T)]), torch.rand(T, k)
    deq = [dequantize_fp8_block(q, s_, block) for q, s_ in ((uq, us), (dq, ds), (suq, sus), (sdq, sds))]
    want_shared, want_routed = moe_experts_shared_unsummed(x, weights, ids, *deq, "relu2")
    shared, routed = ref.moe_experts_shared_fp8_unsummed(x, weights, ids, uq, us, dq, ds, suq, sus, sdq, sds,
                                                          "relu2", block)
    assert shared.shape == (T, H) and routed.shape == (T, k, H)
    assert rel(shared, want_shared.sum(1)) < 1e-5 and rel(routed, want_routed) < 1e-5


# Triton (W8A16) against the references ----------------------------------------------------------

def _gpu():
    from bringup.kernels.triton import availability

    return next(d for d in availability.GPU_DEVICE_TYPES if availability.triton_reason(d) is None)


@pytest.mark.gpu
@pytest.mark.parametrize("rows", [1, 3, 16, 100, 513])
@pytest.mark.parametrize("N, K, block", [(10304, 2688, (128, 128)), (2688, 4096, (128, 128)), (200, 96, PER_TENSOR_BLOCK),
                                         (130, 384, (128, 128))])
def test_triton_fp8_linear_matches_reference(rows, N, K, block):
    from bringup.kernels.triton.fp8_linear import fp8_linear

    dev = _gpu()
    w = torch.randn(N, K, device=dev) * 0.02
    q, s = quantize_fp8_block(w, block)
    x = torch.randn(rows, K, device=dev, dtype=torch.bfloat16)
    bias = torch.randn(N, device=dev, dtype=torch.bfloat16) if N == 130 else None
    expected = ref.fp8_linear(x, q, s, block, bias)
    got = fp8_linear(x, q, s, block, bias)
    assert got.dtype == torch.bfloat16 and got.shape == expected.shape
    assert torch.isfinite(got).all()
    assert rel(got, expected) < 2e-2


@pytest.mark.gpu
@pytest.mark.parametrize("rows", [1, 4, 8])
@pytest.mark.parametrize("N, K", [(10304, 2688), (2688, 4096), (200, 96)])
def test_triton_fp8_gemv_every_candidate_matches_reference(rows, N, K):
    """Each tile config the device may pick at warm-up (and bench --sweep's), at Nano's shapes and a ragged one."""
    from bringup.kernels.triton.fp8_decode_forms import FORMS, dense_runs
    from bringup.kernels.triton.fp8_linear import SWEEP_CONFIGS, _gemv, gemv_candidates

    dev = _gpu()
    q, s = quantize_fp8_block(torch.randn(N, K, device=dev) * 0.02, (128, 128))
    x = torch.randn(rows, K, device=dev, dtype=torch.bfloat16)
    expected = ref.fp8_linear(x, q, s, (128, 128))
    sweep = tuple(c for f in FORMS if dense_runs(f, rows) for c in SWEEP_CONFIGS[f])
    for config in dict.fromkeys(gemv_candidates(rows, FORMS) + sweep):  # every form, the engine's or not
        out = torch.full((rows, N), float("nan"), device=dev, dtype=torch.bfloat16)
        _gemv(x, q, s, None, out, 128, 128, config)
        assert rel(out, expected) < 2e-2, config


@pytest.mark.gpu
@pytest.mark.parametrize("T", [1, 4, 9])
def test_triton_moe_shared_fp8_matches_reference(T, monkeypatch):
    """Nano's shapes: 6 of 128 experts, I = 1856 (not a multiple of the 128 block), a shared expert of
    two slices; at 9 tokens the shared expert runs as its own fp8 MLP. Up to 4 tokens (the GEMV) also
    each tile config the device may pick (and bench --sweep's)."""
    from bringup.kernels.triton import fused_moe_fp8
    from bringup.kernels.triton.tile_picker import TilePicker

    dev = _gpu()
    E, I, H, k, S, block = 128, 1856, 2688, 6, 2, (128, 128)
    (uq, us), (dq, ds) = (quantize_fp8_block(torch.randn(E, n, m, device=dev) * 0.05, block) for n, m in ((I, H), (H, I)))
    (suq, sus), (sdq, sds) = (quantize_fp8_block(torch.randn(n, m, device=dev) * 0.05, block)
                              for n, m in ((S * I, H), (H, S * I)))
    x = torch.randn(T, H, device=dev, dtype=torch.bfloat16)
    ids = torch.stack([torch.randperm(E, device=dev)[:k] for _ in range(T)])
    weights = torch.rand(T, k, device=dev)
    args = (x, weights, ids, uq, us, dq, ds, suq, sus, sdq, sds, "relu2", block)
    ws, wr = ref.moe_experts_shared_fp8_unsummed(*args)
    from bringup.kernels.triton.fp8_decode_forms import FORMS

    candidates = dict.fromkeys(c for f in FORMS for c in fused_moe_fp8.CONFIGS[f] + fused_moe_fp8.SWEEP_CONFIGS[f]) \
        if T <= fused_moe_fp8.GEMV_MAX_TOKENS else ()
    for config in (None, *candidates):
        if config is not None:  # a lone candidate is taken untimed
            monkeypatch.setattr(fused_moe_fp8, "gemv_candidates", lambda tokens, forms=None, c=config: (c,))
            monkeypatch.setattr(fused_moe_fp8, "PICKER", TilePicker("one candidate"))
        gs, gr = fused_moe_fp8.moe_experts_shared_fp8_unsummed(*args)
        got = (gs.float().sum(1) if gs.dim() == 3 else gs.float()) + gr.float().sum(1)
        assert rel(got, ws.float() + wr.float().sum(1)) < 3e-2 and rel(gr, wr) < 3e-2, config
        monkeypatch.undo()


@pytest.mark.gpu
@pytest.mark.parametrize("T", [1, 4, 37, 600])
def test_triton_moe_fp8_matches_reference(T):
    from bringup.kernels.triton.fused_moe_fp8 import moe_experts_fp8

    dev = _gpu()
    E, I, H, k = 16, 256, 384, 4  # Nano's block layout at small sizes
    up, down = torch.randn(E, I, H, device=dev) * 0.05, torch.randn(E, H, I, device=dev) * 0.05
    (uq, us), (dq, ds) = quantize_fp8_block(up, (128, 128)), quantize_fp8_block(down, (128, 128))
    x = torch.randn(T, H, device=dev, dtype=torch.bfloat16)
    ids = torch.stack([torch.randperm(E, device=dev)[:k] for _ in range(T)])
    weights = torch.rand(T, k, device=dev)
    expected = ref.moe_experts_fp8(x, weights, ids, uq, us, dq, ds, "relu2", (128, 128))
    got = moe_experts_fp8(x, weights, ids, uq, us, dq, ds, "relu2", (128, 128))
    assert got.shape == expected.shape and torch.isfinite(got).all()
    assert rel(got, expected) < 3e-2


# The GEMV under Triton's interpreter (CPU): every mask and split-K case, no GPU needed ----------

_INTERPRETED_GEMV = """
import sys
import torch
from bringup.kernels import reference as ref
from bringup.kernels.reference.fp8_linear import PER_TENSOR_BLOCK, quantize_fp8_block
from bringup.kernels.triton.fp8_decode_forms import FORMS, dense_runs
from bringup.kernels.triton.fp8_linear import SWEEP_CONFIGS, _gemv, fp8_linear, gemv_candidates
torch.manual_seed(0)
counters = sys.modules["bringup.kernels.triton.fp8_linear"]._counters
def err(got, want):
    return ((got.float() - want.float()).abs().max() / want.float().abs().max()).item()
for N, K, block, bias in [(200, 384, (128, 128), False), (130, 384, (128, 128), True), (70, 96, PER_TENSOR_BLOCK, False),
                          (96, 200, (64, 32), True), (64, 256, (1, 128), False), (1100, 128, (128, 128), True)]:
    q, s = quantize_fp8_block(torch.randn(N, K) * 0.02, block)
    b = torch.randn(N, dtype=torch.bfloat16) if bias else None
    for rows in (1, 3, 4, 8):
        x = torch.randn(rows, K, dtype=torch.bfloat16)
        want = ref.fp8_linear(x, q, s, block, b)
        got = fp8_linear(x, q, s, block, b)
        assert got.shape == want.shape and got.dtype == want.dtype, (N, K, rows)
        assert err(got, want) < 2e-2, (N, K, block, rows, err(got, want))
        for config in gemv_candidates(rows, FORMS):  # every tile of every form that takes these rows
            out = torch.full((rows, N), float("nan"), dtype=torch.bfloat16)
            assert _gemv(x, q, s, b, out, int(block[0]), int(block[1]), config) == config
            assert err(out, want) < 2e-2, (N, K, block, rows, config, err(out, want))
            assert all(int(c.abs().sum()) == 0 for c in counters.values()), config  # split tiles reset theirs
assert counters  # (some launches split K)
q, s = quantize_fp8_block(torch.randn(160, 256) * 0.02, (128, 128))
for form in FORMS:  # the bench's --sweep tiles
    rows = 3 if dense_runs(form, 3) else 1
    x = torch.randn(rows, 256, dtype=torch.bfloat16)
    want = ref.fp8_linear(x, q, s, (128, 128))
    for config in SWEEP_CONFIGS[form]:
        out = torch.full((rows, 160), float("nan"), dtype=torch.bfloat16)
        _gemv(x, q, s, None, out, 128, 128, config)
        assert err(out, want) < 2e-2, (config, err(out, want))
print("ok")
"""

_INTERPRETED_MOE = """
import torch
from bringup.kernels import reference as ref
from bringup.kernels.reference.fp8_linear import quantize_fp8_block
import bringup.kernels.triton.fused_moe_fp8 as fused
torch.manual_seed(0)
def err(got, want):
    return ((got.float() - want.float()).abs().max() / want.float().abs().max()).item()
routed_cases = [(8, 96, 200, 2, (64, 32)), (6, 130, 256, 3, (128, 128))]
# the shared expert as slices of the experts' width: slices starting inside a scale block (I=96 of
# 64-row blocks; I=48 of 32-wide K blocks), one and three slices, Nano's relu2 and silu
shared_cases = [(8, 96, 200, 2, 2, (64, 32), "relu2"), (6, 48, 256, 3, 3, (128, 32), "silu"),
                (5, 64, 128, 2, 1, (128, 128), "relu2")]
from bringup.kernels.triton.fp8_decode_forms import FORMS
candidates = tuple(dict.fromkeys(c for f in FORMS for c in fused.CONFIGS[f] + fused.SWEEP_CONFIGS[f]))  # (bench --sweep's too)
for i, config in enumerate(candidates):
    fused.gemv_candidates = lambda tokens, forms=None, c=config: (c,)  # the interpreter takes the first: each in turn
    for E, I, H, k, block in routed_cases if i == 0 else ():  # (the others: the shared case has routed rows too)
        for T in (1, 4):  # the per-assignment GEMV
            (uq, us), (dq, ds) = (quantize_fp8_block(torch.randn(E, n, m) * 0.05, block) for n, m in ((I, H), (H, I)))
            x = torch.randn(T, H, dtype=torch.bfloat16)
            ids, w = torch.stack([torch.randperm(E)[:k] for _ in range(T)]), torch.rand(T, k)
            want = ref.moe_experts_fp8(x, w, ids, uq, us, dq, ds, "relu2", block)
            got = fused.moe_experts_fp8(x, w, ids, uq, us, dq, ds, "relu2", block)
            assert got.shape == want.shape, (E, I, H, T)
            assert err(got, want) < 3e-2, (config, E, I, H, block, T, err(got, want))
    for E, I, H, k, S, block, act in shared_cases[:None if i == 0 else 1]:
        for T in (1, 3, 4) if i == 0 else (3,):  # each shared slice's program takes every token
            (uq, us), (dq, ds) = (quantize_fp8_block(torch.randn(E, n, m) * 0.05, block) for n, m in ((I, H), (H, I)))
            (suq, sus), (sdq, sds) = (quantize_fp8_block(torch.randn(n, m) * 0.05, block)
                                      for n, m in ((S * I, H), (H, S * I)))
            x = torch.randn(T, H, dtype=torch.bfloat16)
            ids, w = torch.stack([torch.randperm(E)[:k] for _ in range(T)]), torch.rand(T, k)
            args = (x, w, ids, uq, us, dq, ds, suq, sus, sdq, sds, act, block)
            (ws, wr), (gs, gr) = ref.moe_experts_shared_fp8_unsummed(*args), fused.moe_experts_shared_fp8_unsummed(*args)
            assert gs.shape == (T, S, H) and gr.shape == wr.shape, (gs.shape, gr.shape)
            got_layer, want_layer = gs.float().sum(1) + gr.float().sum(1), ws.float() + wr.float().sum(1)
            assert err(got_layer, want_layer) < 3e-2, (config, E, I, H, S, block, T, act, err(got_layer, want_layer))
            assert err(gr, wr) < 3e-2, config
print("ok")
"""


def test_triton_fp8_gemv_matches_reference_interpreted():
    """Dense GEMV at 1, 3, 4 and 8 rows, through fp8_linear and with each candidate tile config of
    every form (fp8_decode_forms.FORMS: both matrix-unit forms, the one-row and the up-to-8-rows
    vector forms, whether the engine runs them or not): ragged N and K, a K tile smaller than the block,
    per-tensor and per-row scales, bias, the CPU's 4 'compute units' making most cases split K
    (reduced in the launch: every call must leave the tile counters back at 0 for the next), one
    wide N not split."""
    assert_interpreted_ok(_INTERPRETED_GEMV, timeout=240)


def test_triton_fp8_moe_gemv_matches_reference_interpreted():
    """MoE GEMV with each candidate tile config of every form (all cases for the default, one case
    with routed and shared rows at 3 tokens for the others): ragged blocks, 1-4 tokens, the shared expert's slices each
    for all tokens."""
    assert_interpreted_ok(_INTERPRETED_MOE, timeout=240)


_WIDEN_SCRIPT = """
import torch
import triton
import triton.language as tl
from bringup.kernels.triton.fp8_widen import widen_fp8


@triton.jit
def _widen(w_ptr, out_ptr, TRUNCATE: tl.constexpr):
    i = tl.arange(0, 256)
    tl.store(out_ptr + i, widen_fp8(tl.load(w_ptr + i), tl.bfloat16, TRUNCATE))


every = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(torch.float8_e4m3fn)  # every e4m3 bit pattern
want = every.to(torch.bfloat16)
got = {}
for truncate in (True, False):
    got[truncate] = torch.empty(256, dtype=torch.bfloat16)
    _widen[(1,)](every, got[truncate], TRUNCATE=truncate)
# bit for bit what the direct conversion gives, on all 256 ...
assert torch.equal(got[True].view(torch.int16), got[False].view(torch.int16))
# ... and torch's value on every pattern but e4m3fn's two NaNs (the interpreter's own fp8 emulation
# reads 0x7f / 0xff as +-480, on the direct path too)
real = ~want.isnan()
assert int((~real).sum()) == 2
assert torch.equal(got[True][real].view(torch.int16), want[real].view(torch.int16))
print("ok")
"""


def test_fp8_widened_through_float32_is_every_e4m3_value_exactly(tmp_path):
    """fp8_widen.widen_fp8's float32 route to bf16 (the high half of each float32) gives what the
    direct conversion gives for all 256 e4m3 patterns, bit for bit, and torch's bf16 for every finite
    one (subnormals, zeros of both signs); under Triton's interpreter (the kernels' interpreted tests
    take tl.dot in float32 there, so they never widen to bf16)."""
    import os
    import subprocess
    import sys

    pytest.importorskip("triton")
    script = tmp_path / "widen.py"  # (a @triton.jit function needs a file to read its source from)
    script.write_text(_WIDEN_SCRIPT)
    done = subprocess.run([sys.executable, str(script)], env={**os.environ, "TRITON_INTERPRET": "1"},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), (done.stdout[-2000:], done.stderr[-3000:])
