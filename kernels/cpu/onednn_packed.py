"""Weights packed once into oneDNN's blocked layout, for the CPU's products of a few rows and more.

MKL runs its AVX2 code on AMD processors and, on a weight that is cold in cache (a decode step reads
each of its layers' weights once), reaches about 6.5 GB/s at 8 rows where a plain sum streams 24.
oneDNN, given the weight already reordered into its own blocked layout, runs AVX-512 over it in
order: measured on this project's 2-core AMD EPYC (one thread, a [1160, 256] float32 weight, cold),
us per product:

    rows      1     2     4     8    16    32    64   128
    MKL      75   102   142   167   213   309   491   857
    packed  107   119    88   111   142   226   397   729

So from PACKED_MIN_ROWS rows a product takes the packed copy; a lone row keeps MKL. The copy costs
as much memory as the weight (the plain weight stays: one-row products, the references and the
tensor dumps read it). It is made when the engine loads (core/engine/cpu_linears.py, the linears)
or on first use (the MoE's stacks) and kept on the tensor it was made from, with the address and
version counter of every tensor it was built from: a weight changed in place or swapped
gets a new copy, never a stale one. Only parameters keep copies (a view made per call would be
packed again at every call, which costs more than it saves).

oneDNN builds a kernel (0.5 to 1 ms) for each new number of rows: below 32 rows (decode batches)
there are few; from 32 rows (prompts) the rows are padded with zeros to a multiple of ROW_BUCKET.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F

PACKED_MIN_ROWS = 3
ROW_BUCKET = 32
ROWS_HINT = 8  # the batch size oneDNN picks its blocking for (decode batches; prompts gain as much)
_ATTR = "_bringup_onednn_packs"  # on a parameter: {tag: (key, packed tensors)}


def _usable() -> bool:
    try:
        return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise") \
            and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")
    except (AttributeError, RuntimeError):
        return False


USABLE = _usable()
# Cleared by a CPU engine whose weights would not fit twice in the memory it found (core/engine/engine.py):
# its products then read the plain weights (slower, no copies). One engine owns a CPU engine's process.
ENABLED = True


def wanted(x: torch.Tensor, *weights: torch.Tensor) -> bool:
    """Whether a product of x with these weights should take packed copies: float32 on the CPU,
    enough rows, and weights that are parameters (kept, so their copies are too)."""
    if not (USABLE and ENABLED) or x.dim() != 2 or x.shape[0] < PACKED_MIN_ROWS or x.dtype != torch.float32 \
            or x.is_cuda:
        return False
    for w in weights:  # (an inference tensor has no version counter to check a copy by)
        if type(w) is not torch.nn.Parameter or w.dtype != torch.float32 or w.is_inference():
            return False
    return x.device.type == "cpu"


def pack(weight: torch.Tensor) -> torch.Tensor:
    """weight [out, in] (any strides) in oneDNN's blocked layout, for `linear_packed`."""
    return torch.ops.mkldnn._reorder_linear_weight(weight.detach().contiguous(), ROWS_HINT)


def packs_for(owner: torch.nn.Parameter, tag: str, parts: tuple[torch.Tensor, ...],
              build: Callable[[], tuple[torch.Tensor, ...]]) -> tuple[torch.Tensor, ...]:
    """The packed tensors `build()` makes from `parts`, kept on `owner` under `tag` and made again
    only when one of the parts was changed in place or replaced."""
    key = tuple((p.data_ptr(), p._version, tuple(p.shape)) for p in parts)
    kept = owner.__dict__.setdefault(_ATTR, {})
    entry = kept.get(tag)
    if entry is None or entry[0] != key:
        with torch.no_grad():
            entry = kept[tag] = (key, build())
    return entry[1]


def linear_packed(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None = None,
                  relu: bool = False) -> torch.Tensor:
    """x [M, in] @ the packed weight's [out, in].T (+ bias), then max(0, .) when `relu` (a plain
    [out, in] weight works too, at oneDNN's plain-layout speed)."""
    rows = x.shape[0]
    pad = -rows % ROW_BUCKET if rows >= ROW_BUCKET else 0
    padded = F.pad(x, (0, 0, 0, pad)) if pad else x
    out = torch.ops.mkldnn._linear_pointwise(padded, packed, bias, "relu" if relu else "none", [], "")
    return out[:rows] if pad else out


def packed_weight(weight: torch.nn.Parameter) -> torch.Tensor:
    """The linear weight's packed copy (made now if it has none, or a stale one)."""
    return packs_for(weight, "linear", (weight,), lambda: (pack(weight),))[0]


def linear(x: torch.Tensor, weight: torch.nn.Parameter, bias: torch.Tensor | None = None) -> torch.Tensor:
    """F.linear(x, weight, bias) through the weight's packed copy (the caller checked `wanted`)."""
    return linear_packed(x, packed_weight(weight), bias)


def packed_bytes(module: torch.nn.Module) -> int:
    """Bytes of the packed copies the module's parameters keep."""
    total = 0
    for p in module.parameters():
        for _, tensors in p.__dict__.get(_ATTR, {}).values():
            total += sum(t.numel() * t.element_size() for t in tensors)
    return total
