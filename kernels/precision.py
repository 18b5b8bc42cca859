"""float32 means float32 in the Triton kernels too.

Triton (and so flash-linear-attention, whose kernels pass no precision to `tl.dot`) multiplies
float32 inputs as tf32 on NVIDIA GPUs unless TRITON_F32_DEFAULT says otherwise: 10 mantissa bits
at every dot's inputs. torch's own float32 matmuls stay full precision by default, so a float32
model on a GPU would mix the two. That is what a float32 model is asked for to avoid: it is the
numerics-checking dtype (bf16 models are unaffected; their dots take bf16 inputs either way).
The tiny Zamba2 test model turns the Mamba2 scan's tf32 rounding into logit errors of 1e-2 to 3e-1
(TRITON_INTERPRET-free CPU emulation; 1.39e-2 seen on an H200).

TRITON_F32_DEFAULT is one of Triton's cache-invalidating variables (a kernel compiled under tf32
is not reused from disk), but its in-memory cache is keyed without it: set it before the first
float32 kernel compiles in the process.
"""

from __future__ import annotations

import os

F32_DOTS_ENV = "TRITON_F32_DEFAULT"


def full_precision_fp32_dots(device_type: str) -> bool:
    """Ask Triton for IEEE float32 dots on CUDA unless the user chose a setting; True when it now holds."""
    if device_type != "cuda":  # XPU's backend untested with it: its default stays
        return False
    os.environ.setdefault(F32_DOTS_ENV, "ieee")
    return os.environ[F32_DOTS_ENV] == "ieee"
