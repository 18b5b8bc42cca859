"""The dense decode GEMV (kernels/triton/dense_gemv.py: fp8_linear's GEMV with no scales) against
torch's linear under Triton's interpreter: bf16 and fp16 weights, 1 to 16 rows, each candidate tile
(the matrix-unit and the one-row forms), ragged N and K, bias, K split on the CPU's 4 'compute units'
(reduced inside the launch, the tile counters left at 0); above 16 rows and in float32 it is torch's."""

from __future__ import annotations

from triton_interpreter import assert_interpreted_ok

_GEMV = """
import sys
import torch
import torch.nn.functional as F
from bringup.core.bench.launch_count import LaunchCounter
from bringup.kernels.triton import dense_gemv
from bringup.kernels.triton.fp8_linear import _gemv, gemv_candidates
torch.manual_seed(0)
counters = sys.modules["bringup.kernels.triton.fp8_linear"]._counters
zeros = 0
def err(got, want):
    return ((got.float() - want.float()).abs().max() / want.float().abs().max()).item()
for N, K, bias, dtype in [(200, 384, False, torch.bfloat16), (130, 400, True, torch.bfloat16),
                          (72, 96, True, torch.float16), (1100, 128, True, torch.bfloat16)]:
    w = (torch.randn(N, K) * 0.05).to(dtype)
    b = torch.randn(N).to(dtype) if bias else None
    for rows in (1, 3, 16):
        x = torch.randn(rows, K).to(dtype)
        want = F.linear(x.float(), w.float(), None if b is None else b.float())
        with LaunchCounter() as launches:
            got = dense_gemv.linear(x, w, b)
        assert got.shape == (rows, N) and got.dtype == dtype and err(got, want) < 1e-2, (N, K, rows, err(got, want))
        zeros += launches.counts.pop("aten:zeros", 0)  # the split tiles' counters, made once per device
        assert dict(launches.counts) == {"triton:_gemv_kernel": 1}, launches.counts  # one launch, nothing else
        for config in gemv_candidates(rows):  # every tile the device may pick
            out = torch.full((rows, N), float("nan"), dtype=dtype)
            _gemv(x, w, None, b, out, dense_gemv.NO_SCALE_BLOCK, dense_gemv.NO_SCALE_BLOCK, config)
            assert err(out, want) < 1e-2, (N, K, rows, config, err(out, want))
            assert all(int(c.abs().sum()) == 0 for c in counters.values()), config  # split tiles reset theirs
assert counters and zeros == 1  # (some launches split K)
x3 = torch.randn(2, 5, 96, dtype=torch.bfloat16)  # leading dims kept
w = torch.randn(40, 96, dtype=torch.bfloat16)
assert dense_gemv.linear(x3, w).shape == (2, 5, 40)
many, wide = torch.randn(17, 96, dtype=torch.bfloat16), w.float()
with LaunchCounter() as launches:  # past 16 rows, and float32: torch's own
    torch.testing.assert_close(dense_gemv.linear(many, w), F.linear(many, w))
    torch.testing.assert_close(dense_gemv.linear(many[:2].float(), wide), F.linear(many[:2].float(), wide))
assert not any(name.startswith("triton:") for name in launches.counts), launches.counts
print("ok")
"""


def test_dense_gemv_matches_torch_in_one_launch_interpreted():
    assert_interpreted_ok(_GEMV, timeout=600)
