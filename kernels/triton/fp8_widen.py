"""fp8_e4m3 weight tiles widened to the activations' 16-bit type for tl.dot, in registers.

Triton widens fp8 -> bf16 with an F2FP (two fp8 to two f16) and then an F2F per element (f16 ->
bf16): 1.5 conversion instructions a weight, and conversions issue at a fraction of the FMA rate
(the CUDA guide's throughput table, compute capability 9.0: 16 a cycle per SM against 128 FFMA), so
at the H200's bandwidth (~16.5 fp8 bytes a cycle per SM) they may be what bounds a W8A16 GEMV. Here
bf16 goes through float32 instead: F2FP to f16 pairs, HADD2.F32 to float32 (the FMA pipe), and the
high half of each float32 taken by a byte permute (PRMT), which is exact: an e4m3 value has at most
4 significant bits, so a float32 holding it has 16 zero low bits and its high half is the bf16. 0.5
conversion instructions a weight, the same instruction count (core/bench/compiled_loads.py, sm_90).
f16 activations take the one-instruction fp8 -> f16 conversion as it is.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def widen_fp8(wt, dtype: tl.constexpr, TRUNCATE: tl.constexpr):
    """wt (fp8) in `dtype`; TRUNCATE: for bf16, through float32 and its high half (see above)."""
    if TRUNCATE and dtype == tl.bfloat16:
        high = wt.to(tl.float32).to(tl.uint32, bitcast=True) >> 16
        return high.to(tl.uint16).to(tl.bfloat16, bitcast=True)
    else:
        return wt.to(dtype)
