"""The fast GPU kernels (Triton, flash-linear-attention) against the plain-torch reference.

They run on CUDA or XPU only and skip elsewhere with the reason (CI's CPU has no GPU and no triton).
Every output is allocated after the caching allocator was filled with NaN, and every in-place state
pool holds NaN in the slots a call must not touch, so an element a kernel forgets to write, or a
slot it writes that it should not, fails the comparison.
"""

from __future__ import annotations

import sys

import pytest
import torch

from bringup.kernels import dispatch
from bringup.kernels import reference as ref
from bringup.kernels.triton import availability


def _gpu_device_type() -> str | None:
    for device_type in availability.GPU_DEVICE_TYPES:
        if availability.triton_reason(device_type) is None:
            return device_type
    return None


GPU = _gpu_device_type()
needs_triton = pytest.mark.gpu  # skipped without a device, with the reason (tests/conftest.py)
_fla_skip = pytest.mark.skipif(
    GPU is None or availability.fla_reason(GPU) is not None,
    reason=f"flash-linear-attention cannot run: {availability.fla_reason(GPU or 'cuda')}",
)


def needs_fla(test):
    return pytest.mark.gpu(_fla_skip(test))


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def rel_err(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """Largest absolute difference relative to the largest expected magnitude (NaN counts as inf)."""
    diff = (actual.float() - expected.float()).abs().max().item()
    if diff != diff:
        return float("inf")
    return diff / max(expected.float().abs().max().item(), 1e-6)


def assert_close_rel(actual, expected, tol, what):
    assert actual.shape == expected.shape, f"{what}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    assert torch.isfinite(actual).all(), f"{what}: non-finite values (an element was never written)"
    err = rel_err(actual, expected)
    assert err <= tol, f"{what}: relative error {err:.2e} > {tol:.0e}"


def poison_allocator():
    """Fill freed blocks of torch's caching allocator with NaN, in the small and the large pool, so
    that outputs allocated next start as NaN rather than as zeros or old results."""
    small = [torch.full((256 * 1024,), float("nan"), device=GPU) for _ in range(32)]  # 1 MiB each
    large = torch.full((64 * 1024 * 1024,), float("nan"), device=GPU)  # 256 MiB
    del small, large


def tol_for(dtype):
    return 3e-2 if dtype == torch.bfloat16 else 2e-3


# Mamba2 chunked scan (flash-linear-attention) ----------------------------------------------------

SCAN_CASES = [
    # T, H, G, P, N, initial state, dtype
    pytest.param(1, 8, 2, 64, 128, False, torch.bfloat16, id="T1-H8G2-bf16"),
    pytest.param(200, 8, 2, 64, 128, False, torch.bfloat16, id="T200-H8G2-bf16"),
    pytest.param(200, 8, 2, 64, 128, True, torch.bfloat16, id="T200-H8G2-init-bf16"),
    pytest.param(517, 8, 2, 64, 128, True, torch.bfloat16, id="T517-H8G2-init-bf16"),
    pytest.param(130, 4, 4, 32, 64, True, torch.float32, id="T130-H4G4-init-fp32"),
]


def _scan_inputs(T, H, G, P, N, with_init, dtype):
    kw = dict(device=GPU)
    return dict(
        x=torch.randn(T, H, P, **kw).to(dtype),
        dt=(torch.randn(T, H, **kw) - 2.0).to(dtype),
        A=-torch.rand(H, **kw) * 4 - 0.5,
        B=torch.randn(T, G, N, **kw).to(dtype) / N**0.5,
        C=torch.randn(T, G, N, **kw).to(dtype) / N**0.5,
        D=torch.randn(H, **kw),
        dt_bias=torch.randn(H, **kw) * 0.5,
        initial_state=torch.randn(H, P, N, **kw) if with_init else None,
    )


@needs_fla
@pytest.mark.parametrize("T,H,G,P,N,with_init,dtype", SCAN_CASES)
def test_fla_chunk_scan_matches_reference(T, H, G, P, N, with_init, dtype):
    from bringup.kernels.fla.mamba_chunk_scan import mamba_chunk_scan

    inputs = _scan_inputs(T, H, G, P, N, with_init, dtype)
    y_ref, s_ref = ref.mamba_chunk_scan(chunk_size=128, dt_limit=(0.0, 1.0), **inputs)
    poison_allocator()
    y, s = mamba_chunk_scan(chunk_size=128, dt_limit=(0.0, 1.0), **inputs)
    tol = 3e-2 if dtype == torch.bfloat16 else 1e-2  # fla's float32 products may run as tf32
    assert_close_rel(y, y_ref, tol, "y")
    assert_close_rel(s, s_ref, tol, "final state")


@needs_fla
def test_fla_chunk_scan_in_two_chunks_equals_one():
    """A prompt fed in two pieces, the second starting from the first's final state (chunked prefill)."""
    from bringup.kernels.fla.mamba_chunk_scan import mamba_chunk_scan

    inputs = _scan_inputs(300, 8, 2, 64, 128, False, torch.bfloat16)
    y_all, s_all = mamba_chunk_scan(chunk_size=128, **inputs)
    first = {k: (v[:190] if k in ("x", "dt", "B", "C") else v) for k, v in inputs.items()}
    second = {k: (v[190:] if k in ("x", "dt", "B", "C") else v) for k, v in inputs.items()}
    y1, s1 = mamba_chunk_scan(chunk_size=128, **first)
    second["initial_state"] = s1
    y2, s2 = mamba_chunk_scan(chunk_size=128, **second)
    assert_close_rel(torch.cat([y1, y2]), y_all, 3e-2, "y in two pieces")
    assert_close_rel(s2, s_all, 3e-2, "final state in two pieces")


@needs_fla
@pytest.mark.parametrize("with_init", [False, True])
def test_fla_varlen_scan_matches_reference(with_init):
    """Several prompts of different lengths in one fla call (cu_seqlens), each from its own state."""
    from bringup.kernels.fla.mamba_chunk_scan import mamba_chunk_scan_varlen

    starts = [0, 1, 130, 200, 457]
    inputs = _scan_inputs(starts[-1], 8, 2, 64, 128, False, torch.bfloat16)
    inputs.pop("initial_state")
    states = torch.randn(len(starts) - 1, 8, 64, 128, device=GPU) if with_init else None
    y_ref, s_ref = ref.mamba_chunk_scan_varlen(seq_starts=starts, chunk_size=128, initial_states=states, **inputs)
    poison_allocator()
    y, s = mamba_chunk_scan_varlen(seq_starts=starts, chunk_size=128, initial_states=states, **inputs)
    assert_close_rel(y, y_ref, 3e-2, "y")
    assert_close_rel(s, s_ref, 3e-2, "final states")


@needs_triton
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_triton_conv_varlen_matches_reference(dtype):
    """A prefill chunk: prompts of 1 to 300 tokens (shorter than the kernel too), x a strided view
    of the in_proj output, states from a pool in place (fresh prompts from zeros)."""
    from bringup.kernels.triton.causal_conv1d_varlen import causal_conv1d_varlen, causal_conv1d_varlen_inplace

    starts, C, K = [0, 1, 3, 303, 340], 384, 4
    wide = torch.randn(starts[-1], C + 64, device=GPU).to(dtype)
    x = wide[:, 32:32 + C]
    w, b = torch.randn(C, K, device=GPU).to(dtype), torch.randn(C, device=GPU).to(dtype)
    init = torch.randn(4, C, K - 1, device=GPU).to(dtype)
    for initial in (None, init):
        y_ref, f_ref = ref.causal_conv1d_varlen(x, starts, w, b, initial, "silu")
        poison_allocator()
        y, f = causal_conv1d_varlen(x, starts, w, b, initial, "silu")
        assert_close_rel(y, y_ref, tol_for(dtype), "y")
        assert_close_rel(f, f_ref, 0, "final states")
    pool = torch.full((7, C, K - 1), float("nan"), device=GPU).to(dtype)
    slots, has = torch.tensor([5, 0, 2, 6], device=GPU), torch.tensor([True, False, True, False], device=GPU)
    pool[slots[has]] = init[has]
    expected = pool.clone()
    y_ref = ref.causal_conv1d_varlen_inplace(x, starts, w, b, expected, slots, has, "silu")
    y = causal_conv1d_varlen_inplace(x, starts, w, b, pool, slots, has, "silu")
    assert_close_rel(y, y_ref, tol_for(dtype), "y in place")
    assert torch.equal(pool[slots], expected[slots]), "final states in the pool"
    assert torch.isnan(pool[[1, 3, 4]]).all(), "slots of no request are untouched"


# Mamba2 decode step (Triton) ---------------------------------------------------------------------

STEP_CASES = [
    # batch, H, G, P, N, dt_limit, state dtype, input dtype
    pytest.param(1, 8, 2, 64, 128, (0.0, float("inf")), torch.float32, torch.bfloat16, id="B1-H8G2-fp32state"),
    pytest.param(13, 8, 2, 64, 128, (0.001, 0.5), torch.float32, torch.bfloat16, id="B13-H8G2-clamped"),
    pytest.param(5, 6, 3, 24, 48, (0.0, float("inf")), torch.float32, torch.float32, id="B5-odd-sizes-fp32"),
    pytest.param(7, 4, 1, 16, 16, (0.0, float("inf")), torch.bfloat16, torch.bfloat16, id="B7-G1-bf16state"),
]


def _step_inputs(batch, H, G, P, N, dtype):
    kw = dict(device=GPU)
    return dict(
        x=torch.randn(batch, H, P, **kw).to(dtype), dt=torch.randn(batch, H, **kw).to(dtype),
        A=-torch.rand(H, **kw) * 4, B=torch.randn(batch, G, N, **kw).to(dtype),
        C=torch.randn(batch, G, N, **kw).to(dtype), D=torch.randn(H, **kw), dt_bias=torch.randn(H, **kw),
    )


@needs_triton
@pytest.mark.parametrize("batch,H,G,P,N,dt_limit,state_dtype,dtype", STEP_CASES)
def test_triton_state_update_matches_reference(batch, H, G, P, N, dt_limit, state_dtype, dtype):
    from bringup.kernels.triton.mamba_state_update import mamba_state_update

    inputs = _step_inputs(batch, H, G, P, N, dtype)
    state = torch.randn(batch, H, P, N, device=GPU).to(state_dtype)
    before = state.clone()
    y_ref, s_ref = ref.mamba_state_update(state, dt_limit=dt_limit, **inputs)
    poison_allocator()
    y, s = mamba_state_update(state, dt_limit=dt_limit, **inputs)
    tol = 2e-2 if torch.bfloat16 in (dtype, state_dtype) else 1e-5
    assert_close_rel(y, y_ref, tol, "y")
    assert_close_rel(s, s_ref, tol, "new state")
    assert torch.equal(state, before), "the op form must not modify its input state"


@needs_triton
def test_triton_state_update_in_place_touches_only_its_slots():
    from bringup.kernels.triton.mamba_state_update import mamba_state_update_inplace

    batch, H, G, P, N, slots_total = 6, 8, 2, 64, 128, 16
    inputs = _step_inputs(batch, H, G, P, N, torch.bfloat16)
    pool = torch.full((slots_total, H, P, N), float("nan"), device=GPU)
    slots = torch.tensor([9, 2, 15, 0, 7, 4], device=GPU)
    pool[slots] = torch.randn(batch, H, P, N, device=GPU)
    y_ref, s_ref = ref.mamba_state_update(pool[slots], **inputs)
    poison_allocator()
    y = mamba_state_update_inplace(pool, slots, **inputs)
    assert_close_rel(y, y_ref, 2e-2, "y")
    assert_close_rel(pool[slots], s_ref, 2e-2, "updated slots")
    others = torch.ones(slots_total, dtype=torch.bool, device=GPU)
    others[slots] = False
    assert pool[others].isnan().all(), "a slot outside the batch was written"


# Causal conv1d decode step (Triton) --------------------------------------------------------------

CONV_CASES = [
    pytest.param(1, 6144, 4, "silu", torch.bfloat16, id="B1-C6144-K4-silu-bf16"),
    pytest.param(9, 1000, 4, None, torch.float32, id="B9-C1000-K4-noact-fp32"),
    pytest.param(4, 300, 2, "silu", torch.float32, id="B4-C300-K2-silu-fp32"),
]


@needs_triton
@pytest.mark.parametrize("batch,channels,width,activation,dtype", CONV_CASES)
def test_triton_conv_update_matches_reference(batch, channels, width, activation, dtype):
    from bringup.kernels.triton.causal_conv1d_update import causal_conv1d_update

    x = torch.randn(batch, channels, device=GPU).to(dtype)
    state = torch.randn(batch, channels, width - 1, device=GPU).to(dtype)
    weight, bias = torch.randn(channels, width, device=GPU).to(dtype), torch.randn(channels, device=GPU).to(dtype)
    y_ref, s_ref = ref.causal_conv1d_update(x, state, weight, bias, activation)
    poison_allocator()
    y, s = causal_conv1d_update(x, state, weight, bias, activation)
    assert_close_rel(y, y_ref, tol_for(dtype), "y")
    assert_close_rel(s, s_ref, 0.0, "new state")  # a shift: exact


@needs_triton
def test_triton_conv_update_in_place_touches_only_its_slots():
    from bringup.kernels.triton.causal_conv1d_update import causal_conv1d_update_inplace

    batch, channels, width, slots_total = 3, 512, 4, 8
    x = torch.randn(batch, channels, device=GPU)
    pool = torch.full((slots_total, channels, width - 1), float("nan"), device=GPU)
    slots = torch.tensor([6, 1, 3], device=GPU)
    pool[slots] = torch.randn(batch, channels, width - 1, device=GPU)
    weight, bias = torch.randn(channels, width, device=GPU), torch.randn(channels, device=GPU)
    y_ref, s_ref = ref.causal_conv1d_update(x, pool[slots], weight, bias, "silu")
    y = causal_conv1d_update_inplace(x, pool, slots, weight, bias, "silu")
    assert_close_rel(y, y_ref, 1e-5, "y")
    assert_close_rel(pool[slots], s_ref, 0.0, "updated slots")
    assert pool[[0, 2, 4, 5, 7]].isnan().all(), "a slot outside the batch was written"


# Paged attention decode (Triton) -----------------------------------------------------------------

ATTN_CASES = [
    # lengths, Hq, Hkv, D, page_size, window, dtype
    pytest.param((1, 37, 300), 32, 2, 128, 16, None, torch.bfloat16, id="nemotron-heads-bf16"),
    pytest.param((5, 64, 129, 2), 8, 8, 64, 16, None, torch.float32, id="MHA-D64-fp32"),
    pytest.param((50, 7), 12, 4, 80, 8, 20, torch.float32, id="D80-page8-window20-fp32"),
    # Long contexts: the context is sliced across programs and the slices merged.
    pytest.param((1, 700, 3000), 32, 2, 128, 16, None, torch.bfloat16, id="split-context-bf16"),
    pytest.param((3000, 40), 12, 4, 80, 8, 300, torch.float32, id="split-context-window300-fp32"),
]


@needs_triton
@pytest.mark.parametrize("lengths,Hq,Hkv,D,page_size,window,dtype", ATTN_CASES)
def test_triton_paged_decode_matches_reference(lengths, Hq, Hkv, D, page_size, window, dtype):
    from bringup.kernels.triton.paged_attention_decode import paged_attention_decode

    batch = len(lengths)
    max_pages = max(-(-n // page_size) for n in lengths)
    num_pages = batch * max_pages + 3
    k_cache = torch.randn(num_pages, page_size, Hkv, D, device=GPU).to(dtype)
    v_cache = torch.randn(num_pages, page_size, Hkv, D, device=GPU).to(dtype)
    # Pages shuffled across requests; unused table entries hold garbage the kernel must not follow.
    tables = torch.randperm(num_pages, device=GPU)[: batch * max_pages].view(batch, max_pages).int()
    for i, n in enumerate(lengths):
        tables[i, -(-n // page_size):] = 10_000_000
    ctx = torch.tensor(lengths, device=GPU, dtype=torch.int32)
    q = torch.randn(batch, Hq, D, device=GPU).to(dtype)
    expected = ref.paged_attention_decode(q, k_cache, v_cache, tables, ctx, D**-0.5, window)
    poison_allocator()
    out = paged_attention_decode(q, k_cache, v_cache, tables, ctx, D**-0.5, window)
    assert_close_rel(out, expected, tol_for(dtype), "attention output")


SOFTCAP_SINK_CASES = [
    # lengths, Hq, Hkv, D, page_size, window, softcap, sinks, dtype: Gemma 2's soft-cap, gpt-oss's sinks
    pytest.param((5, 37, 300), 8, 4, 256, 16, None, 50.0, False, torch.bfloat16, id="gemma2-softcap-D256-bf16"),
    pytest.param((50, 7, 130), 64, 8, 64, 16, 128, None, True, torch.bfloat16, id="gpt-oss-sinks-window-bf16"),
    pytest.param((3000, 40), 12, 4, 80, 8, 300, 5.0, True, torch.float32, id="split-softcap-sinks-window300-fp32"),
    pytest.param((1, 2500), 8, 2, 64, 16, None, None, True, torch.float32, id="split-sinks-fp32"),
]


@needs_triton
@pytest.mark.parametrize("lengths,Hq,Hkv,D,page_size,window,softcap,with_sinks,dtype", SOFTCAP_SINK_CASES)
def test_triton_paged_decode_softcap_and_sinks_match_reference(lengths, Hq, Hkv, D, page_size, window, softcap,
                                                               with_sinks, dtype):
    from bringup.kernels.triton.paged_attention_decode import paged_attention_decode

    batch = len(lengths)
    max_pages = max(-(-n // page_size) for n in lengths)
    num_pages = batch * max_pages + 3
    k_cache = torch.randn(num_pages, page_size, Hkv, D, device=GPU).to(dtype)
    v_cache = torch.randn(num_pages, page_size, Hkv, D, device=GPU).to(dtype)
    tables = torch.randperm(num_pages, device=GPU)[: batch * max_pages].view(batch, max_pages).int()
    ctx = torch.tensor(lengths, device=GPU, dtype=torch.int32)
    q = (3 * torch.randn(batch, Hq, D, device=GPU)).to(dtype)  # scores large enough for the cap to bite
    sinks = torch.linspace(-2.0, 6.0, Hq, device=GPU) if with_sinks else None  # some outweigh every key
    expected = ref.paged_attention_decode(q, k_cache, v_cache, tables, ctx, D**-0.5, window, softcap, sinks)
    poison_allocator()
    out = paged_attention_decode(q, k_cache, v_cache, tables, ctx, D**-0.5, window, softcap, sinks)
    assert_close_rel(out, expected, tol_for(dtype), "attention output")


# Mamba (v1) selective scan (Triton): Jamba's prompt scan --------------------------------------------

SELECTIVE_CASES = [
    # prompt lengths, channels, d_state, initial states, dtype
    pytest.param((1,), 64, 16, False, torch.float32, id="T1-fp32"),
    pytest.param((37, 1, 300), 200, 16, True, torch.float32, id="varlen-init-fp32"),
    pytest.param((517, 64), 8192, 16, True, torch.bfloat16, id="jamba-mini-width-bf16"),
]


@needs_triton
@pytest.mark.parametrize("lengths,width,N,with_init,dtype", SELECTIVE_CASES)
def test_triton_selective_scan_matches_the_stepwise_recurrence(lengths, width, N, with_init, dtype):
    from bringup.kernels.reference.selective_scan import selective_scan_stepwise
    from bringup.kernels.triton.selective_scan import selective_scan_varlen

    T = sum(lengths)
    starts = [0]
    for n in lengths:
        starts.append(starts[-1] + n)
    dt0 = torch.exp(torch.empty(width, device=GPU).uniform_(-6.9, -2.3))  # Jamba's dt init, [1e-3, 0.1]
    x, z = torch.randn(T, width, device=GPU).to(dtype), torch.randn(T, width, device=GPU).to(dtype)
    dt = (0.3 * torch.randn(T, width, device=GPU)).to(dtype)
    A = -torch.arange(1, N + 1, device=GPU).float().repeat(width, 1)
    B, C = torch.randn(T, N, device=GPU).to(dtype), torch.randn(T, N, device=GPU).to(dtype)
    D, dt_bias = torch.randn(width, device=GPU), dt0 + torch.log(-torch.expm1(-dt0))
    h0 = torch.randn(len(lengths), width, N, device=GPU) if with_init else None
    y0, h_0 = selective_scan_stepwise(x, dt, A, B, C, starts, D, z, dt_bias, h0)
    poison_allocator()
    y, h = selective_scan_varlen(x, dt, A, B, C, starts, D, z, dt_bias, h0)
    assert_close_rel(y, y0, tol_for(dtype), "y")
    assert_close_rel(h, h_0, tol_for(dtype), "final states")


@needs_triton
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_triton_selective_decode_step_matches_reference_and_updates_pool_slots_in_place(dtype):
    from bringup.kernels.triton import selective_scan as tri

    batch, width, N, num_slots = 5, 8192, 16, 9
    dt0 = torch.exp(torch.empty(width, device=GPU).uniform_(-6.9, -2.3))
    args = dict(x=torch.randn(batch, width, device=GPU).to(dtype), dt=(0.3 * torch.randn(batch, width, device=GPU)).to(dtype),
                A=-torch.arange(1, N + 1, device=GPU).float().repeat(width, 1),
                B=torch.randn(batch, N, device=GPU).to(dtype), C=torch.randn(batch, N, device=GPU).to(dtype),
                D=torch.randn(width, device=GPU), z=torch.randn(batch, width, device=GPU).to(dtype),
                dt_bias=dt0 + torch.log(-torch.expm1(-dt0)))
    pool = torch.randn(num_slots, width, N, device=GPU)
    slots = torch.tensor([7, 0, 3, 8, 2], device=GPU)
    expected_pool = pool.clone()
    y_ref = ref.selective_state_update_inplace(expected_pool, slots, **args)
    y_step, new_state = tri.selective_state_update(pool[slots], **args)
    assert_close_rel(y_step, y_ref, tol_for(dtype), "y (step)")
    assert_close_rel(new_state, expected_pool[slots], tol_for(dtype), "state (step)")
    untouched = pool[[1, 4, 5, 6]].clone()
    y = tri.selective_state_update_inplace(pool, slots, **args)
    assert_close_rel(y, y_ref, tol_for(dtype), "y (in place)")
    assert_close_rel(pool, expected_pool, tol_for(dtype), "state pool")
    assert torch.equal(pool[[1, 4, 5, 6]], untouched)


# Dispatch ----------------------------------------------------------------------------------------

@needs_triton
def test_dispatch_picks_fast_ops_on_the_gpu_and_reference_on_request(monkeypatch):
    monkeypatch.delenv(dispatch.ENV_VAR, raising=False)
    names = dispatch.ops_for(GPU).implementations
    assert names["mamba_state_update"] == "triton"
    assert names["causal_conv1d_update"] == "triton"
    assert names["paged_attention_decode"] == "triton"
    assert names["selective_scan_varlen"] == "triton"
    assert names["selective_state_update"] == names["selective_state_update_inplace"] == "triton"
    assert names["mamba_chunk_scan"] == ("fla" if availability.fla_reason(GPU) is None else "reference")
    assert set(dispatch.ops_for("cpu").implementations.values()) == {"reference", "cpu"}  # the CPU's own (kernels/cpu)
    monkeypatch.setenv(dispatch.ENV_VAR, "reference")
    assert set(dispatch.ops_for(GPU).implementations.values()) == {"reference"}


def test_cpu_op_set_loads_no_gpu_kernel_module(monkeypatch):
    """Runs everywhere (CI too): asking for CPU ops, or for a GPU that is absent, imports no kernel
    module that needs triton, and the reason the reference stays is recorded."""
    monkeypatch.delenv(dispatch.ENV_VAR, raising=False)
    assert set(dispatch.ops_for("cpu").implementations.values()) == {"reference", "cpu"}  # no triton, no fla
    from bringup.kernels.triton import registration

    for device_type in availability.GPU_DEVICE_TYPES:
        if availability.triton_reason(device_type) is None:
            continue
        assert set(dispatch.ops_for(device_type).implementations.values()) == {"reference"}
        assert registration.skipped[device_type]["mamba_state_update"] == availability.triton_reason(device_type)
    if GPU is None:
        loaded = [m for m in sys.modules if m.startswith("bringup.kernels.triton.") and m.rsplit(".", 1)[1]
                  not in ("availability", "registration", "launch", "tile_picker", "fp8_decode_forms", "moe_gated_forms")]
        # (those need no triton; other test files import the form tables at collection)
        assert not loaded, f"kernel modules imported without a GPU: {loaded}"


# Gated delta rule (flash-linear-attention) --------------------------------------------------------

def _gdr_inputs(T, Hk, Hv, dk, dv, dtype):
    q, k = (torch.randn(T, Hk, dk, device=GPU, dtype=dtype) for _ in range(2))
    v = torch.randn(T, Hv, dv, device=GPU, dtype=dtype)
    g = -torch.rand(T, Hv, device=GPU) * 0.5
    beta = torch.rand(T, Hv, device=GPU, dtype=dtype)
    return q, k, v, g, beta


@needs_fla
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("Hk,Hv", [(2, 2), (2, 4)])
def test_fla_gated_delta_rule_chunk_matches_reference(Hk, Hv, dtype):
    from bringup.kernels.fla.gated_delta_rule import gated_delta_rule_chunk

    starts = [0, 70, 71, 200]
    q, k, v, g, beta = _gdr_inputs(200, Hk, Hv, 64, 64, dtype)
    init = torch.randn(3, Hv, 64, 64, device=GPU) * 0.1
    poison_allocator()
    o, final = gated_delta_rule_chunk(q, k, v, g, beta, starts, init)
    ro, rfinal = ref.gated_delta_rule_chunk(q, k, v, g, beta, starts, init)
    assert_close_rel(o, ro, tol_for(dtype) * 5, "output")
    assert_close_rel(final, rfinal, tol_for(dtype) * 5, "final states")


@needs_fla
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fla_gated_delta_rule_decode_touches_only_its_slots(dtype):
    from bringup.kernels.fla.gated_delta_rule import gated_delta_rule_recurrent_inplace

    q, k, v, g, beta = _gdr_inputs(3, 2, 4, 64, 64, dtype)
    pool = torch.full((6, 4, 64, 64), float("nan"), device=GPU)
    slots = torch.tensor([4, 0, 2], device=GPU)
    pool[slots] = torch.randn(3, 4, 64, 64, device=GPU) * 0.1
    ref_pool = pool.clone()
    o = gated_delta_rule_recurrent_inplace(q, k, v, g, beta, pool, slots)
    ro = ref.gated_delta_rule_recurrent_inplace(q, k, v, g, beta, ref_pool, slots)
    assert_close_rel(o, ro, tol_for(dtype) * 5, "output")
    assert_close_rel(pool[slots], ref_pool[slots], tol_for(dtype) * 5, "stepped states")
    assert torch.isnan(pool[[1, 3, 5]]).all(), "a slot outside the batch was written"


# Lightning attention (MiniMax): prompts through flash-linear-attention, decode in Triton ----------

def _lightning_inputs(T, H, d, dtype):
    q, k, v = (torch.randn(T, H, d, device=GPU, dtype=dtype) * 0.3 for _ in range(3))
    slopes = torch.tensor([2 ** (-8 * (i + 1) / H) for i in range(H)], device=GPU)  # ALiBi-like, as MiniMax's
    return q, k, v, slopes


@needs_fla
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fla_lightning_attention_chunk_matches_reference(dtype):
    from bringup.kernels.fla.lightning_attention import lightning_attention_chunk

    starts = [0, 70, 71, 200]
    q, k, v, slopes = _lightning_inputs(200, 4, 64, dtype)
    init = torch.randn(3, 4, 64, 64, device=GPU) * 0.1
    poison_allocator()
    o, final = lightning_attention_chunk(q, k, v, slopes, starts, init)
    ro, rfinal = ref.lightning_attention_chunk(q, k, v, slopes, starts, init)
    assert_close_rel(o, ro, tol_for(dtype) * 5, "output")
    assert_close_rel(final, rfinal, tol_for(dtype) * 5, "final states")


@needs_triton
@pytest.mark.parametrize("state_dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("B", [1, 32])
def test_triton_lightning_decode_at_minimax_shapes_touches_only_its_slots(B, state_dtype):
    """MiniMax-M1's 64 heads of 128, bf16 activations, the pool in float32 or bf16."""
    from bringup.kernels.triton.lightning_attention_decode import lightning_attention_recurrent_inplace

    q, k, v, slopes = _lightning_inputs(B, 64, 128, torch.bfloat16)
    pool = torch.full((2 * B + 1, 64, 128, 128), float("nan"), device=GPU, dtype=state_dtype)
    slots = torch.randperm(2 * B + 1, device=GPU)[:B]
    pool[slots] = (torch.randn(B, 64, 128, 128, device=GPU) * 0.1).to(state_dtype)
    ref_pool = pool.clone()
    poison_allocator()
    o = lightning_attention_recurrent_inplace(q, k, v, slopes, pool, slots)
    ro = ref.lightning_attention_recurrent_inplace(q, k, v, slopes, ref_pool, slots)
    assert_close_rel(o, ro, tol_for(torch.bfloat16), "output")
    assert_close_rel(pool[slots], ref_pool[slots], tol_for(state_dtype), "stepped states")
    untouched = torch.ones(2 * B + 1, dtype=torch.bool, device=GPU)
    untouched[slots] = False
    assert torch.isnan(pool[untouched]).all(), "a slot outside the batch was written"
