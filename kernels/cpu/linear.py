"""F.linear on the CPU: oneDNN from a few rows, MKL for one.

torch's CPU products go to MKL, which runs its AVX2 code on AMD processors; oneDNN runs AVX-512
where the processor has it. A parameter's product of PACKED_MIN_ROWS rows or more goes through
its packed copy (onednn_packed.py: 1.5x to 1.6x faster from 4 to 32 rows, a decode batch's and a
prompt's products). A weight that is not a parameter (a view made for one call) has no copy:
from 32 rows (prompts, a MoE expert's share of a prompt), where a product is bound by arithmetic,
oneDNN takes about half MKL's time even on the plain weight (measured on this project's 2-core AMD
EPYC: a [648, 256] weight at 48 rows, 157 against 81 us; 263 rows, 807 against 369 us). It builds
a new primitive (0.5 to 1 ms) for every new shape, so those rows are padded with zeros up to a
multiple of onednn_packed.ROW_BUCKET: a prompt of any length meets a few shapes only. Below that MKL keeps them.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from . import onednn_packed
from .opaque import opaque

MIN_ROWS = 32  # from here oneDNN's product on a plain weight, padded, beats MKL's (float32, one or two cores)


@opaque("(Tensor x, Tensor weight, Tensor? bias=None) -> Tensor",
        lambda x, weight, bias=None: x.new_empty(*x.shape[:-1], weight.shape[0]))
def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """x [M, in] @ weight [out, in].T (+ bias): F.linear's result, to float32 rounding."""
    if onednn_packed.wanted(x, weight):
        return onednn_packed.linear(x, weight, bias)
    if onednn_packed.USABLE and x.dim() == 2 and x.shape[0] >= MIN_ROWS and x.dtype == torch.float32 \
            and weight.dtype == torch.float32 and x.device.type == "cpu" and x.is_contiguous():
        return onednn_packed.linear_packed(x, weight, bias)  # (oneDNN takes a plain weight too; rows padded)
    return F.linear(x, weight, bias)
