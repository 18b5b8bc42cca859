"""A tensor's digest: what a layer-level trace keeps of a block output or a recurrent state, small
whatever the model's size, yet comparable with the other run's digest of the same tensor.

A real Nemotron-3-Nano prefill of 1,024 tokens gives 52 block outputs of 1024 x 2688 values and 23
SSM states of 64 x 64 x 128 per step: kept whole, one trace is gigabytes. A digest keeps
- exact statistics in float64: sum, sum of absolute values, a position-weighted sum (values moved
  to other places, an off-by-one in a window, move it where the plain sums stay), L2 norm, largest
  magnitude, and how many values are not finite;
- a sketch: the tensor's rows times a fixed random Gaussian matrix R [columns, k] scaled by
  1/sqrt(k), the same R on every device (drawn on the CPU from a fixed seed). The sketch is linear,
  so sketch(a) - sketch(b) = sketch(a - b), and E ||x R||^2 = ||x||^2: ||sketch(a) - sketch(b)|| /
  ||a|| estimates the relative error ||a - b|| / ||a|| wherever in the tensor the difference sits,
  to within a few percent with the rows x k >= 512 values kept (Johnson-Lindenstrauss), within
  about 12% where the difference sits in one token (its row's 32 values);
- the whole tensor when it is small (at most `KEEP_BELOW` values, so tiny models compare exactly)
  or when asked (the block a comparison wants to look into).
Block outputs are sketched per token (rows = tokens); states per chunk of their flattened values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

KEEP_BELOW = 4096  # tensors with at most this many values are kept whole
SKETCH_VALUES = 512  # rows x k of a sketch at least this (the estimate's spread ~ 1/sqrt(2 x 512), 3%)
MIN_K, MAX_K = 8, 256
ROW_K = 32  # a block output's rows (tokens) get at least this many columns: one token's error alone
# is then estimated from 32 values (spread 1/sqrt(64), 12%), and each token's own error can be read
STATE_CHUNK = 1024  # a state's flattened values are sketched in rows of this many
SEED = 32
WEIGHT_PERIOD = 251  # a prime: a shift by any whole row of a power-of-two width still moves the weights


@dataclass
class Digest:
    shape: tuple
    sum: float
    abs_sum: float
    weighted: float  # sum of x_i * w_i, w_i = 1 + (i mod 251) / 251 over the flattened values
    norm: float
    max_abs: float
    nonfinite: int
    per_row: bool = False  # sketched per row (a block output's tokens) or per chunk (a state)
    sketch: object = None  # float32 [rows, k] on the CPU, or None when `full` is kept
    full: object = None  # the tensor itself, float32 on the CPU, when small or asked

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def checksum(self) -> tuple[float, float, float]:
        return self.sum, self.abs_sum, self.weighted

    def stats(self) -> dict:
        return {"shape": list(self.shape), "sum": self.sum, "abs_sum": self.abs_sum, "weighted": self.weighted,
                "norm": self.norm,
                "max_abs": self.max_abs, "nonfinite": self.nonfinite}

    def nbytes(self) -> int:
        kept = [t for t in (self.sketch, self.full) if t is not None]
        return sum(t.numel() * t.element_size() for t in kept)


def sketch_k(rows: int, per_row: bool = False) -> int:
    return max(ROW_K if per_row else MIN_K, min(MAX_K, -(-SKETCH_VALUES // max(rows, 1))))


@lru_cache(maxsize=32)
def _projection_cpu(columns: int, k: int):
    import torch

    gen = torch.Generator(device="cpu").manual_seed(SEED * 1_000_003 + columns * 1_009 + k)
    return torch.randn(columns, k, generator=gen, dtype=torch.float64) / math.sqrt(k)


_ON_DEVICE: dict = {}


def projection(columns: int, k: int, device):
    """The fixed R for this width, moved once to the device (the same values everywhere)."""
    key = (columns, k, str(device))
    if key not in _ON_DEVICE:
        if len(_ON_DEVICE) > 64:
            _ON_DEVICE.clear()
        _ON_DEVICE[key] = _projection_cpu(columns, k).to(device)
    return _ON_DEVICE[key]


def as_rows(t, per_row: bool):
    """[rows, columns] float64: per token for a block output, fixed chunks (zero-padded) for a state."""
    import torch

    x = t.detach().to(torch.float64)
    if per_row and x.dim() >= 2:
        return x.reshape(x.shape[0], -1)
    flat = x.reshape(-1)
    if flat.numel() <= STATE_CHUNK:
        return flat.reshape(1, -1)
    pad = (-flat.numel()) % STATE_CHUNK
    return torch.nn.functional.pad(flat, (0, pad)).reshape(-1, STATE_CHUNK)


def digest(t, *, per_row: bool = False, keep_full: bool = False, keep_below: int = KEEP_BELOW) -> Digest:
    """The digest of `t` (any device, any float dtype), computed where `t` lives."""
    import torch

    x = t.detach()
    wide = x.to(torch.float64)
    finite = torch.isfinite(wide)
    nonfinite = int((~finite).sum().item())
    clean = torch.where(finite, wide, torch.zeros((), dtype=torch.float64, device=wide.device))
    flat = wide.reshape(-1)
    weights = 1 + torch.arange(flat.numel(), device=flat.device, dtype=torch.float64).remainder_(WEIGHT_PERIOD) / WEIGHT_PERIOD
    stats = torch.stack([wide.sum(), wide.abs().sum(), (flat * weights).sum(), torch.linalg.vector_norm(clean),
                         clean.abs().max() if clean.numel() else clean.new_zeros(())]).cpu().tolist()
    d = Digest(tuple(x.shape), *stats, nonfinite, per_row)
    if keep_full or x.numel() <= keep_below:
        d.full = x.float().cpu().clone()
        return d
    rows = as_rows(clean, per_row)
    k = sketch_k(rows.shape[0], per_row)
    d.sketch = (rows @ projection(rows.shape[1], k, rows.device)).float().cpu()
    return d


def rel_err(a: Digest, b: Digest) -> float:
    """||a - b|| / ||a||: exact where both kept the tensor, else estimated from the sketches.
    Infinite where the shapes differ or only one side has values that are not finite."""
    import torch

    if a.shape != b.shape or a.nonfinite != b.nonfinite:
        return math.inf
    if a.full is not None and b.full is not None:  # values that are not finite count as 0 on both sides
        diff = torch.linalg.vector_norm(_clean(a.full) - _clean(b.full)).item()
    else:
        sa, sb = _sketch_of(a), _sketch_of(b)
        if sa.shape != sb.shape:
            return math.inf
        diff = torch.linalg.vector_norm(sa.double() - sb.double()).item()
    if a.norm == 0:
        return 0.0 if diff == 0 else math.inf
    return diff / a.norm


def _clean(t):
    import torch

    t = t.double()
    return torch.where(torch.isfinite(t), t, torch.zeros((), dtype=torch.float64))


def _sketch_of(d: Digest):
    """A digest's sketch; one that kept its tensor sketches it now (the same R as the other side)."""
    if d.sketch is not None:
        return d.sketch
    rows = as_rows(_clean(d.full), d.per_row)
    return (rows @ projection(rows.shape[1], sketch_k(rows.shape[0], d.per_row), "cpu")).float()
