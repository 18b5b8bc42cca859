"""The softmax top-k router (Mixtral, Qwen-MoE, Qwen3-Next): the reference rounds its weights to the
dtype asked exactly as a `.to` after it would; the one-launch Triton kernel (kernels/triton/route_softmax.py)
gives the reference's experts and weights under Triton's interpreter, renormalised or not, over
expert counts that are and are not powers of two, float32 and bfloat16 logits, float32 and rounded weights (tied experts in
either order)."""

from __future__ import annotations

import torch

from bringup.kernels.reference import route_softmax
from triton_interpreter import assert_interpreted_ok


def test_reference_rounds_the_weights_as_a_cast_after_it():
    logits = torch.randn(4, 12, generator=torch.Generator().manual_seed(0))
    w, ids = route_softmax(logits, 3, True)
    wb, idb = route_softmax(logits, 3, True, torch.bfloat16)
    assert w.dtype == torch.float32 and wb.dtype == torch.bfloat16
    assert torch.equal(ids, idb) and torch.equal(wb, w.to(torch.bfloat16))


_INTERPRETED = """
import torch
from bringup.kernels.reference import route_softmax as ref
from bringup.kernels.triton.route_softmax import route_softmax as fast
torch.manual_seed(0)
bad = []
for T, E, k in ((1, 8, 2), (5, 10, 3), (3, 128, 8), (2, 512, 10), (4, 6, 6)):
    for dtype in (torch.float32, torch.bfloat16):
        wide = (3 * torch.randn(T, E + 4)).to(dtype)
        logits = wide[:, :E]  # a view into a wider product, as a stacked router's
        for norm in (True, False):
            for wdt in (None, torch.bfloat16):
                w, i = fast(logits, k, norm, wdt)
                w_ref, i_ref = ref(logits, k, norm, wdt)
                # equal bfloat16 logits tie: torch.topk may order those experts either way
                i, order = i.sort(-1)
                w = w.gather(1, order)
                i_ref, order = i_ref.sort(-1)
                w_ref = w_ref.gather(1, order)
                case = f"T={T} E={E} k={k} {dtype} norm={norm} weights {wdt}"
                if not torch.equal(i, i_ref):
                    bad.append(f"{case}: experts {i.tolist()} vs {i_ref.tolist()}")
                elif w.dtype != w_ref.dtype:
                    bad.append(f"{case}: dtype {w.dtype} vs {w_ref.dtype}")
                else:
                    tol = dict(rtol=1e-5, atol=1e-6) if wdt is None else dict(rtol=1e-2, atol=1e-3)
                    try:
                        torch.testing.assert_close(w, w_ref, **tol)
                    except AssertionError as err:
                        bad.append(f"{case}: {err}")
assert not bad, bad
print("ok")
"""


def test_triton_route_softmax_matches_the_reference_interpreted():
    assert_interpreted_ok(_INTERPRETED)


def _gpu():
    from bringup.kernels.triton import availability

    return next((d for d in availability.GPU_DEVICE_TYPES if availability.triton_reason(d) is None), None)


def test_triton_route_softmax_on_a_gpu_at_qwen3_next_shapes():
    import pytest

    gpu = _gpu()
    if gpu is None:
        pytest.skip("no device for the Triton kernels")
    from bringup.kernels.triton.route_softmax import route_softmax as fast

    for T in (1, 7, 64):
        logits = torch.randn(T, 512 + 1, device=gpu).bfloat16()[:, :512]  # Qwen3-Next: 512 experts, top 10
        w, i = fast(logits, 10, True, torch.bfloat16)
        w_ref, i_ref = route_softmax(logits, 10, True, torch.bfloat16)
        assert torch.equal(i.sort(-1).values, i_ref.sort(-1).values)
        torch.testing.assert_close(w.float().sum(-1), w_ref.float().sum(-1), rtol=1e-2, atol=1e-2)
