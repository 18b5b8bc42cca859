"""The digests a layer-level trace keeps (core/compare/digest.py): exact checksums that any changed
value moves, a sketch whose difference estimates the relative error wherever the difference sits,
the same projection whatever was drawn before, and a size that stays small at Nemotron-3-Nano's
real widths."""

from __future__ import annotations

import math

import pytest
import torch

from bringup.core.compare import digest as dg


def _rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_checksums_are_the_tensors_own_sums_in_float64():
    t = _rand(37, 300).to(torch.bfloat16)
    d = dg.digest(t, per_row=True)
    wide = t.double()
    assert d.sum == pytest.approx(wide.sum().item(), abs=1e-9)
    assert d.abs_sum == pytest.approx(wide.abs().sum().item(), rel=1e-12)
    assert d.norm == pytest.approx(torch.linalg.vector_norm(wide).item(), rel=1e-12)
    assert d.max_abs == wide.abs().max().item() and d.nonfinite == 0 and d.shape == (37, 300)
    w = 1 + torch.arange(wide.numel(), dtype=torch.float64).remainder(dg.WEIGHT_PERIOD) / dg.WEIGHT_PERIOD
    assert d.weighted == pytest.approx((wide.reshape(-1) * w).sum().item(), abs=1e-9)
    moved = t.clone()
    moved[5, 7] = -moved[5, 7] if moved[5, 7] != 0 else 1.0  # one value's sign: the sum moves, the abs sum does not
    other = dg.digest(moved, per_row=True)
    assert other.sum != d.sum and other.abs_sum == pytest.approx(d.abs_sum, rel=1e-12)
    grown = t.clone()
    grown[0, 0] += 1.0
    assert dg.digest(grown, per_row=True).abs_sum != d.abs_sum
    shifted = dg.digest(t.roll(1, dims=-1), per_row=True)  # the same values one place on: only the weighted sum sees it
    assert (shifted.sum, shifted.abs_sum) == pytest.approx((d.sum, d.abs_sum), rel=1e-12)
    assert abs(shifted.weighted - d.weighted) > 1e-3 * d.abs_sum / dg.WEIGHT_PERIOD


def test_a_large_tensor_keeps_a_sketch_not_itself():
    d = dg.digest(_rand(64, 2688), per_row=True)
    assert d.full is None and d.sketch.shape == (64, dg.ROW_K) and d.sketch.dtype == torch.float32
    assert d.sketch.numel() >= dg.SKETCH_VALUES
    small = dg.digest(_rand(8, 64), per_row=True)
    assert small.sketch is None and torch.equal(small.full, _rand(8, 64))  # tiny tensors compare exactly


@pytest.mark.parametrize("where", ["scale", "one token", "one value", "one state chunk"])
def test_the_sketch_estimates_the_relative_error_wherever_it_sits(where):
    per_row = where != "one state chunk"
    a = _rand(96, 2688) if per_row else _rand(64, 64, 128)
    b = a.clone()
    if where == "scale":
        b *= 1.02
    elif where == "one token":
        b[17] += 0.3 * _rand(2688, seed=1)
    elif where == "one value":
        b[50, 1000] += 40.0
    else:
        b[3, 10] += 0.5 * _rand(128, seed=2)
    true = (torch.linalg.vector_norm((a - b).double()) / torch.linalg.vector_norm(a.double())).item()
    est = dg.rel_err(dg.digest(a, per_row=per_row), dg.digest(b, per_row=per_row))
    # 3 spreads: the whole tensor's 3,072 values for a scale, a token's 32 for one token or value, 8 x 8 for a chunk
    assert true > 1e-3 and est == pytest.approx(true, rel=0.1 if where == "scale" else 0.4)
    assert dg.rel_err(dg.digest(a, per_row=per_row), dg.digest(a.clone(), per_row=per_row)) == 0.0


def test_the_projection_is_the_same_whatever_came_before():
    a = _rand(40, 700)
    first = dg.digest(a, per_row=True).sketch
    dg._projection_cpu.cache_clear()
    dg._ON_DEVICE.clear()
    dg.digest(_rand(3, 999), per_row=True)  # another width drawn first
    assert torch.equal(dg.digest(a, per_row=True).sketch, first)


def test_a_tensor_kept_whole_compares_with_the_other_sides_sketch():
    a = _rand(40, 700)
    whole = dg.digest(a, per_row=True, keep_full=True)
    sketched = dg.digest(a * 1.01, per_row=True)
    assert whole.full is not None and sketched.sketch is not None
    assert dg.rel_err(whole, sketched) == pytest.approx(0.01, rel=0.15)
    assert dg.rel_err(whole, dg.digest(a, per_row=True)) < 1e-6


def test_values_that_are_not_finite_on_one_side_only_are_an_infinite_error():
    a = _rand(40, 700)
    b = a.clone()
    b[2, 3] = float("nan")
    db = dg.digest(b, per_row=True)
    assert db.nonfinite == 1 and math.isfinite(db.norm)
    assert dg.rel_err(dg.digest(a, per_row=True), db) == math.inf
    assert dg.rel_err(db, dg.digest(b.clone(), per_row=True)) == 0.0  # the same NaN in both: the rest agrees
    assert dg.rel_err(dg.digest(a, per_row=True), dg.digest(a[:39], per_row=True)) == math.inf


def test_nano_sized_digests_stay_small():
    """Nemotron-3-Nano-30B-A3B: a 1,024-token prefill's block output, a decode step's, an SSM state
    (64 heads x 64 x 128, float32) and a conv state (6,144 channels x 3)."""
    sizes = {name: dg.digest(t, per_row=per_row).nbytes()
             for name, t, per_row in (("prefill", _rand(1024, 2688), True), ("decode", _rand(1, 2688), True),  # decode: whole
                                      ("ssm", _rand(64, 64, 128), False), ("conv", _rand(6144, 3), False))}
    assert sizes["prefill"] <= 1024 * 32 * 4  # an eightieth of the 11 MB tensor
    assert sizes["decode"] <= 2688 * 4 and sizes["ssm"] <= 512 * 8 * 4 and sizes["conv"] <= 18 * 29 * 4
    # one whole trace of 52 blocks and 23 states over a prefill and 8 decode steps: ~15 MB, where the
    # tensors themselves would be 1 GB (52 x 11 MB of prefill outputs, 23 x 9 x 2.1 MB of states)
    total = 52 * (sizes["prefill"] + 8 * sizes["decode"]) + 23 * 9 * (sizes["ssm"] + sizes["conv"])
    assert total < 16 * 2 ** 20
