"""The CPU's own ops (kernels/cpu/) against the references they replace, and their registration.

Each CPU op computes the reference's arithmetic in fewer ops or through oneDNN; results agree to
float32 rounding, and in-place ops leave the same pool behind.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import bringup.kernels.reference as ref
from bringup.kernels import dispatch
from bringup.kernels.cpu import linear as cpu_linear
from bringup.kernels.cpu import mamba_decode
from bringup.kernels.cpu import paged_attention_decode as cpu_attention
from bringup.kernels.cpu.mamba_chunk_scan import mamba_chunk_scan_varlen as cpu_scan
from bringup.kernels.cpu.mlp import mlp as cpu_mlp
from bringup.kernels.cpu.moe import moe_experts as cpu_moe
from bringup.kernels.cpu.moe import moe_form as cpu_moe_form
from bringup.kernels.cpu.registration import CPU_OPS


def close(a, b, tol=1e-5):
    torch.testing.assert_close(a, b, rtol=tol, atol=tol)


@pytest.mark.parametrize("slots", [[2, 3, 4], [5], [4, 1, 6], [3, 2]], ids=["run", "one", "scattered", "descending"])
def test_mamba_decode_ops_update_the_pool_like_the_reference(slots):
    g = torch.Generator().manual_seed(len(slots))
    n, H, P, N, G, C, K = len(slots), 4, 3, 5, 2, 7, 4
    idx = torch.tensor(slots)
    assert (mamba_decode.slot_run(idx) is not None) == (slots in ([2, 3, 4], [5]))
    x, dt = torch.randn(n, H, P, generator=g), torch.randn(n, H, generator=g)
    A, D, dt_bias = -torch.rand(H, generator=g), torch.randn(H, generator=g), torch.randn(H, generator=g)
    B, Cm = torch.randn(n, G, N, generator=g), torch.randn(n, G, N, generator=g)
    pool = torch.randn(8, H, P, N, generator=g)
    mine, theirs = pool.clone(), pool.clone()
    y = mamba_decode.mamba_state_update_inplace(mine, idx, x, dt, A, B, Cm, D, dt_bias, True, (0.0, 5.0))
    y_ref = ref.mamba_state_update_inplace(theirs, idx, x, dt, A, B, Cm, D, dt_bias, True, (0.0, 5.0))
    close(y, y_ref)
    close(mine, theirs)
    untouched = [s for s in range(8) if s not in slots]
    assert torch.equal(mine[untouched], pool[untouched])

    xc, w, b = torch.randn(n, C, generator=g), torch.randn(C, K, generator=g), torch.randn(C, generator=g)
    conv = torch.randn(8, C, K - 1, generator=g)
    mine, theirs = conv.clone(), conv.clone()
    for bias, act in ((b, "silu"), (None, None)):
        close(mamba_decode.causal_conv1d_update_inplace(xc, mine, idx, w, bias, act),
              ref.causal_conv1d_update_inplace(xc, theirs, idx, w, bias, act))
        assert torch.equal(mine, theirs)


def test_a_bfloat16_state_pool_takes_the_gathered_path():
    g = torch.Generator().manual_seed(3)
    n, H, P, N, G = 2, 2, 3, 4, 1
    pool = torch.randn(4, H, P, N, generator=g).to(torch.bfloat16)
    args = (torch.tensor([1, 2]), torch.randn(n, H, P, generator=g), torch.randn(n, H, generator=g), -torch.rand(H),
            torch.randn(n, G, N, generator=g), torch.randn(n, G, N, generator=g))
    mine, theirs = pool.clone(), pool.clone()
    close(mamba_decode.mamba_state_update_inplace(mine, *args), ref.mamba_state_update_inplace(theirs, *args))
    close(mine.float(), theirs.float(), 1e-2)


@pytest.mark.parametrize("starts", [[0, 1], [0, 9], [0, 5, 6, 16], [0, 16, 20]])
@pytest.mark.parametrize("with_state", [True, False])
def test_prompt_scan_equals_the_reference(starts, with_state):
    g = torch.Generator().manual_seed(starts[-1])
    T, H, P, N, G = starts[-1], 4, 3, 5, 2
    args = (torch.randn(T, H, P, generator=g), torch.randn(T, H, generator=g) * 3, -torch.rand(H, generator=g) * 4,
            torch.randn(T, G, N, generator=g), torch.randn(T, G, N, generator=g), starts)
    rest = (torch.randn(H, generator=g), torch.randn(H, generator=g),
            torch.randn(len(starts) - 1, H, P, N, generator=g) if with_state else None, True, (0.0, float("inf")))
    for chunk in (16, 8):  # 8: the longest prompt exceeds the chunk and the reference runs
        y, final = cpu_scan(*args, chunk, *rest)
        y_ref, final_ref = ref.mamba_chunk_scan_varlen(*args, chunk, *rest)
        close(y, y_ref, 1e-4)
        close(final, final_ref, 1e-4)


def test_prompt_scan_floors_vanishing_decays_without_changing_the_sums():
    # dt * A of -30 per token: decays across a few tokens go far below float32's normal range.
    T, H, P, N = 12, 2, 3, 4
    g = torch.Generator().manual_seed(5)
    args = (torch.randn(T, H, P, generator=g), torch.full((T, H), 30.0), -torch.ones(H),
            torch.randn(T, 1, N, generator=g), torch.randn(T, 1, N, generator=g), [0, T], 16)
    y, final = cpu_scan(*args, None, None, torch.randn(1, H, P, N, generator=g), False)
    y_ref, final_ref = ref.mamba_chunk_scan_varlen(*args, None, None, None, False)
    assert torch.isfinite(y).all()
    close(final, final_ref, 1e-4)  # the initial state decayed to nothing in both
    close(y, y_ref, 1e-4)


@pytest.mark.parametrize("rows", [3, cpu_linear.MIN_ROWS, 70])
def test_linear_pads_many_rows_for_onednn_and_equals_f_linear(rows):
    g = torch.Generator().manual_seed(rows)
    x, w, b = torch.randn(rows, 24, generator=g), torch.randn(40, 24, generator=g), torch.randn(40, generator=g)
    for weight in (w, w.t().contiguous().t()):  # as nn.Linear stores it, and as the CPU engine does
        y = cpu_linear.linear(x, weight, b)
        assert y.shape == (rows, 40)
        close(y, F.linear(x, w, b))
    close(cpu_linear.linear(x, w), F.linear(x, w))


@pytest.mark.parametrize("T", [1, 5, 40])
@pytest.mark.parametrize("gated", [False, True])
def test_mlp_and_routed_experts_equal_the_reference(T, gated):
    g = torch.Generator().manual_seed(T)
    H, I, E, k = 16, 24, 4, 2
    x = torch.randn(T, H, generator=g)
    up, down = torch.randn(E, I, H, generator=g), torch.randn(E, H, I, generator=g)
    gate = torch.randn(E, I, H, generator=g) if gated else None
    act = "silu" if gated else "relu2"
    close(cpu_mlp(x, up[0], down[0], None if gate is None else gate[0], act),
          ref.mlp(x, up[0], down[0], None if gate is None else gate[0], act), 1e-4)
    weights = torch.rand(T, k, generator=g)
    ids = torch.stack([torch.randperm(E, generator=g)[:k] for _ in range(T)])
    close(cpu_moe(x, weights, ids, up, down, gate, act), ref.moe_experts(x, weights, ids, up, down, gate, act), 1e-4)
    with torch.inference_mode():  # as `bringup check-kernels` replays it (inference tensors have no version)
        replayed = cpu_moe(x.clone(), weights.clone(), ids.clone(), up.clone(), down.clone(),
                           None if gate is None else gate.clone(), act)
    close(replayed, ref.moe_experts(x, weights, ids, up, down, gate, act), 1e-4)
    up.mul_(2)  # a weight changed in place: the remembered per-expert views see it
    close(cpu_moe(x, weights, ids, up, down, gate, act), ref.moe_experts(x, weights, ids, up, down, gate, act), 1e-4)
    assert cpu_moe(x[:0], weights[:0], ids[:0], up, down, gate, act).shape == (0, H)


@pytest.mark.parametrize("form", ["each", "dense", "sorted"])
@pytest.mark.parametrize("gated", [False, True])
def test_both_moe_forms_equal_the_reference_and_the_width_picks_one(form, gated):
    g = torch.Generator().manual_seed(7)
    H, I, E, k, T = 16, 24, 4, 2, 6
    x = torch.randn(T, H, generator=g)
    up, down = torch.randn(E, I, H, generator=g), torch.randn(E, H, I, generator=g)
    up, down = (w.transpose(-1, -2).contiguous().transpose(-1, -2) for w in (up, down))  # the CPU engine's layout
    gate = torch.randn(E, I, H, generator=g) if gated else None
    act = "silu" if gated else "relu2"
    weights = torch.rand(T, k, generator=g)
    ids = torch.stack([torch.randperm(E, generator=g)[:k] for _ in range(T)])
    ids[:, 0] = 0  # one expert every token picks (some twice: the reference sums both)
    for rows in (slice(None), slice(0, 1)):  # six tokens, and one alone
        xs, ws, ids_ = x[rows], weights[rows], ids[rows]
        close(cpu_moe(xs, ws, ids_, up, down, gate, act, strategy=form),
              ref.moe_experts(xs, ws, ids_, up, down, gate, act), 1e-4)
    # One or two tokens each on its own; dense while the assignments reach every expert about once,
    # for decode-sized batches only; sorted otherwise (and for every width in bfloat16).
    assert cpu_moe_form(1, 2, 4, torch.float32) == "each" and cpu_moe_form(2, 6, 128, torch.float32) == "each"
    assert cpu_moe_form(3, 2, 4, torch.float32) == "dense" and cpu_moe_form(3, 2, 8, torch.float32) == "sorted"
    assert cpu_moe_form(500, 2, 4, torch.float32) == "sorted" and cpu_moe_form(8, 2, 8, torch.bfloat16) == "sorted"
    assert cpu_moe_form(1, 2, 8, torch.bfloat16) == "sorted"


@pytest.mark.parametrize("window", [None, 5])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_sdpa_decode_attention_equals_the_reference(window, dtype):
    g = torch.Generator().manual_seed(3)
    B, Hq, Hkv, D, page, num_pages = 3, 6, 2, 8, 4, 20
    k_cache = torch.randn(num_pages, page, Hkv, D, generator=g).to(dtype)
    v_cache = torch.randn(num_pages, page, Hkv, D, generator=g).to(dtype)
    lens = torch.tensor([1, 9, 14])
    tables = torch.randperm(num_pages, generator=g)[:B * 4].view(B, 4).int()
    tables[0, 1:] = 999  # entries past a request's pages may hold anything
    q = torch.randn(B, Hq, D, generator=g).to(dtype)
    got = cpu_attention.paged_attention_decode(q, k_cache, v_cache, tables, lens, 0.3, window)
    assert got.dtype == dtype
    close(got.float(), ref.paged_attention_decode(q, k_cache, v_cache, tables, lens, 0.3, window).float(),
          1e-5 if dtype == torch.float32 else 2e-2)
    capped = cpu_attention.paged_attention_decode(q, k_cache, v_cache, tables, lens, 0.3, window, softcap=2.0)
    close(capped, ref.paged_attention_decode(q, k_cache, v_cache, tables, lens, 0.3, window, softcap=2.0), 0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_kv_cache_write_by_page_and_offset_equals_the_reference(dtype):
    from bringup.kernels.cpu.kv_cache_write import kv_cache_write

    g = torch.Generator().manual_seed(4)
    caches = [torch.randn(5, 4, 2, 8, generator=g).to(dtype) for _ in range(2)]
    expected = [c.clone() for c in caches]
    slots = torch.tensor([0, 7, 19, 9])  # pages 0, 1, 4, 2 at offsets 0, 3, 3, 1
    k, v = torch.randn(4, 2, 8, generator=g), torch.randn(4, 2, 8, generator=g)
    kv_cache_write(*caches, slots, k, v)
    ref.kv_cache_write(*expected, slots, k, v)
    assert all(torch.equal(a, b) for a, b in zip(caches, expected))
    assert torch.equal(caches[0][4, 3], k[2].to(dtype)) and torch.equal(caches[1][2, 1], v[3].to(dtype))


def test_the_cpu_op_set_carries_them_and_reference_brings_the_references_back(monkeypatch):
    monkeypatch.delenv(dispatch.ENV_VAR, raising=False)
    ops = dispatch.ops_for("cpu")
    assert {op for op, name in ops.implementations.items() if name != "reference"} == set(CPU_OPS)
    assert ops.mamba_state_update_inplace is mamba_decode.mamba_state_update_inplace
    assert ops.implementations["mamba_state_update_inplace"] == "cpu"
    monkeypatch.setenv(dispatch.ENV_VAR, "reference")
    assert set(dispatch.ops_for("cpu").implementations.values()) == {"reference"}
