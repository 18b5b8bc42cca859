"""The Mamba (v1) selective scan: the chunked op against the one-token-at-a-time recurrence (its
oracle) and against transformers' own torch scan (Jamba's); varlen against one sequence at a time, a
scan split in two with the state carried, chunks that end early where decays are large, and one-step
updates."""

from __future__ import annotations

import pytest
import torch

from bringup.kernels.reference.selective_scan import (LOG_LIMIT, chunk_bounds, selective_scan_stepwise,
                                                     selective_scan_varlen, selective_state_update)

W, N = 6, 4  # channels, state size


def _inputs(T: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    return dict(x=r(T, W), dt=r(T, W), A=-torch.rand(W, N, generator=g) * 2, B=r(T, N), C=r(T, N), D=r(W),
                z=r(T, W), dt_bias=0.3 * r(W))


def test_matches_transformers_torch_scan():
    jamba = pytest.importorskip("transformers.models.jamba.modeling_jamba")
    a = _inputs(9)
    y, final = selective_scan_varlen(a["x"], a["dt"], a["A"], a["B"], a["C"], [0, 9], a["D"], a["z"], a["dt_bias"])
    theirs, last = jamba.mamba_selective_scan(
        a["x"].T[None], a["dt"].T[None], a["A"], a["B"].T[None], a["C"].T[None], D=a["D"], z=a["z"].T[None],
        delta_bias=a["dt_bias"], delta_softplus=True, return_last_state=True)
    torch.testing.assert_close(y, theirs[0].T, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(final, last, atol=1e-5, rtol=1e-5)


def test_varlen_equals_each_sequence_and_a_split_scan_carries_the_state():
    a = _inputs(12, seed=1)
    keys = ("x", "dt", "B", "C", "z")
    cut = lambda s, e: [a[k][s:e] for k in keys]  # noqa: E731

    def scan(s, e, init=None):
        x, dt, B, C, z = cut(s, e)
        return selective_scan_varlen(x, dt, a["A"], B, C, [0, e - s], a["D"], z, a["dt_bias"], init)

    init = torch.randn(2, W, N)
    y, finals = selective_scan_varlen(a["x"], a["dt"], a["A"], a["B"], a["C"], [0, 5, 12], a["D"], a["z"],
                                      a["dt_bias"], init)
    for i, (s, e) in enumerate([(0, 5), (5, 12)]):
        y_i, f_i = scan(s, e, init[i:i + 1])
        torch.testing.assert_close(y[s:e], y_i)
        torch.testing.assert_close(finals[i:i + 1], f_i)
    # 7 tokens then 5 more from the carried state = 12 at once.
    y_all, f_all = scan(0, 12)
    y_a, f_a = scan(0, 7)
    y_b, f_b = scan(7, 12, f_a)
    torch.testing.assert_close(torch.cat([y_a, y_b]), y_all, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(f_b, f_all, atol=1e-5, rtol=1e-5)


def test_state_update_steps_like_the_scan():
    a = _inputs(3, seed=2)
    y_all, f_all = selective_scan_varlen(a["x"], a["dt"], a["A"], a["B"], a["C"], [0, 3], a["D"], a["z"], a["dt_bias"])
    state = torch.zeros(1, W, N)
    for t in range(3):
        y, state = selective_state_update(state, a["x"][t:t + 1], a["dt"][t:t + 1], a["A"], a["B"][t:t + 1],
                                          a["C"][t:t + 1], a["D"], a["z"][t:t + 1], a["dt_bias"])
        torch.testing.assert_close(y[0], y_all[t], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(state, f_all, atol=1e-5, rtol=1e-5)


def _jamba_like(lengths, width=W, n=N, seed=3, dt_scale=1.0):
    """Inputs with decays as Jamba initialises them (A = -(1..N), dt in [1e-3, 0.1]), times dt_scale."""
    g = torch.Generator().manual_seed(seed)
    T = sum(lengths)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    dt0 = dt_scale * torch.exp(torch.empty(width).uniform_(-6.9, -2.3, generator=g))
    starts = [0]
    for length in lengths:
        starts.append(starts[-1] + length)
    args = dict(x=r(T, width), dt=0.3 * r(T, width), A=-torch.arange(1, n + 1).float().repeat(width, 1), B=r(T, n),
                C=r(T, n), D=r(width), z=r(T, width), dt_bias=dt0 + torch.log(-torch.expm1(-dt0)),
                initial_states=r(len(lengths), width, n))
    return args, starts


def _scan(fn, args, starts, **kw):
    a = args
    return fn(a["x"], a["dt"], a["A"], a["B"], a["C"], starts, a["D"], a["z"], a["dt_bias"], a["initial_states"], **kw)


@pytest.mark.parametrize("chunk", [None, 1, 3, 8])
def test_chunked_scan_equals_the_stepwise_recurrence(chunk):
    args, starts = _jamba_like([23, 1, 9, 40])
    y, finals = _scan(selective_scan_varlen, args, starts, chunk=chunk)
    y0, finals0 = _scan(selective_scan_stepwise, args, starts)
    torch.testing.assert_close(y, y0, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(finals, finals0, atol=1e-5, rtol=1e-4)


def test_chunks_span_many_tokens_at_jamba_decays_and_end_early_at_large_ones():
    assert chunk_bounds([0.5] * 10, longest=4) == [(0, 4), (4, 8), (8, 10)]
    assert chunk_bounds([25.0, 25.0, 25.0, 1.0], longest=8) == [(0, 2), (2, 4)]  # 75 > LOG_LIMIT
    assert chunk_bounds([1.0, LOG_LIMIT + 5, 1.0], longest=8) == [(0, 1), (1, 2), (2, 3)]  # past it alone
    # Large time steps: every chunk ends before 1/E overflows, and the result is still the recurrence's.
    args, starts = _jamba_like([30, 12], dt_scale=40.0)
    y, finals = _scan(selective_scan_varlen, args, starts, chunk=16)
    y0, finals0 = _scan(selective_scan_stepwise, args, starts)
    assert torch.isfinite(y).all() and torch.isfinite(finals).all()
    torch.testing.assert_close(y, y0, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(finals, finals0, atol=1e-5, rtol=1e-4)


def test_in_place_step_on_a_pool_equals_gather_step_scatter():
    from bringup.kernels.reference.selective_scan import selective_state_update_inplace

    a = _inputs(2, seed=4)
    pool = torch.randn(5, W, N)
    slots = torch.tensor([3, 0])
    expected_pool = pool.clone()
    args = (a["x"], a["dt"], a["A"], a["B"], a["C"], a["D"], a["z"], a["dt_bias"])
    y_ref, new = selective_state_update(expected_pool[slots], *args)
    expected_pool[slots] = new
    y = selective_state_update_inplace(pool, slots, *args)
    assert torch.equal(y, y_ref) and torch.equal(pool, expected_pool)
