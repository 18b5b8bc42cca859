"""F.linear on the CPU, through oneDNN when a call has many rows.

torch's CPU products go to MKL, which runs its AVX2 code on AMD processors; oneDNN runs AVX-512
where the processor has it. From about 32 rows (prompt tokens, a MoE expert's share of a prompt)
a product is bound by arithmetic and oneDNN takes about half MKL's time (measured on this
project's 2-core AMD EPYC: a [648, 256] weight at 48 rows, 157 against 81 us; 263 rows, 807
against 369 us). Below that, at decode sizes, the product is bound by reading the weight and MKL
is as fast or faster, so it keeps them. oneDNN takes the weight as it lies (no packed copy), so
memory stays as it is. It builds a new primitive (0.5 to 1 ms) for every new shape, so the rows are
padded with zeros up to a multiple of ROW_BUCKET: a prompt of any length meets a few shapes only.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

MIN_ROWS = 32  # from here oneDNN's product, padded, beats MKL's (float32, one or two cores)
ROW_BUCKET = 32


def _onednn_usable() -> bool:
    try:
        return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")
    except (AttributeError, RuntimeError):
        return False


ONEDNN = _onednn_usable()


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """x [M, in] @ weight [out, in].T (+ bias): F.linear's result, to float32 rounding."""
    if ONEDNN and x.dim() == 2 and x.shape[0] >= MIN_ROWS and x.dtype == torch.float32 \
            and weight.dtype == torch.float32 and x.device.type == "cpu" and x.is_contiguous():
        rows = x.shape[0]
        pad = -rows % ROW_BUCKET
        padded = F.pad(x, (0, 0, 0, pad)) if pad else x
        return torch.ops.mkldnn._linear_pointwise(padded, weight, bias, "none", [], "")[:rows]
    return F.linear(x, weight, bias)
