"""Each reference kernel against a simpler (slower, more obviously right) formulation."""

from __future__ import annotations

import os

import pytest
import torch
import torch.nn.functional as F

from bringup.kernels import reference as ref


# CPU by default; BRINGUP_TEST_DEVICE=cuda (or xpu) runs the same comparisons on an accelerator.
DEVICE = os.environ.get("BRINGUP_TEST_DEVICE", "cpu")


@pytest.fixture(autouse=True)
def _seed_and_device():
    torch.manual_seed(0)
    previous = torch.get_default_device()
    torch.set_default_device(DEVICE)
    yield
    torch.set_default_device(previous)


def close(a, b, tol=1e-5):
    torch.testing.assert_close(a, b, rtol=tol, atol=tol)


# Norms ---------------------------------------------------------------------------------------

def test_rms_norm_matches_torch_rms_norm():
    x, w = torch.randn(5, 32), torch.randn(32)
    expected = F.rms_norm(x, (32,), w, eps=1e-6)
    close(ref.rms_norm(x, w, 1e-6), expected)
    close(ref.rms_norm(x, w, 1e-6, multiply_in_float32=True), expected)


@pytest.mark.parametrize("norm_before_gate", [False, True])
def test_gated_rms_norm_is_a_per_group_rms_norm(norm_before_gate):
    x, z, w = torch.randn(3, 4, 24), torch.randn(3, 4, 24), torch.randn(24)
    out = ref.gated_rms_norm(x, z, w, 1e-5, group_size=8, norm_before_gate=norm_before_gate)
    gate = F.silu(z)
    parts = []
    for g in range(3):
        sl = slice(8 * g, 8 * g + 8)
        xs = x[..., sl] if norm_before_gate else x[..., sl] * gate[..., sl]
        y = F.rms_norm(xs, (8,), w[sl], eps=1e-5)
        parts.append(y * gate[..., sl] if norm_before_gate else y)
    close(out, torch.cat(parts, dim=-1))


# Causal conv1d -------------------------------------------------------------------------------

def _full_conv(x, w, b):
    """Conv1d with left padding K-1 over the whole sequence, then silu."""
    C, K = w.shape
    y = F.conv1d(x.t()[None], w[:, None, :], b, padding=K - 1, groups=C)[0, :, : x.shape[0]]
    return F.silu(y).t()


def test_causal_conv1d_in_chunks_and_steps_equals_one_full_conv():
    T, C, K = 11, 6, 4
    x, w, b = torch.randn(T, C), torch.randn(C, K), torch.randn(C)
    expected = _full_conv(x, w, b)
    y, state = ref.causal_conv1d(x, w, b, None)
    close(y, expected)
    close(state, x[-(K - 1):].t())
    # The same sequence in two chunks, the second starting from the first one's state.
    y1, s1 = ref.causal_conv1d(x[:5], w, b, None)
    y2, s2 = ref.causal_conv1d(x[5:], w, b, s1)
    close(torch.cat([y1, y2]), expected)
    close(s2, state)
    # The tail one token at a time through the batched update (a batch of the same sequence twice).
    _, s = ref.causal_conv1d(x[:7], w, b, None)
    s = torch.stack([s, s])
    for t in range(7, T):
        yt, s = ref.causal_conv1d_update(torch.stack([x[t], x[t]]), s, w, b)
        close(yt[0], expected[t])
        close(yt[1], expected[t])
    close(s[0], state)


def test_causal_conv1d_short_sequence_keeps_older_state():
    C, K = 3, 4
    w, b, x0 = torch.randn(C, K), torch.randn(C), torch.randn(C, K - 1)
    x = torch.randn(1, C)
    _, state = ref.causal_conv1d(x, w, b, x0)
    close(state, torch.cat([x0[:, 1:], x.t()], dim=1))


# Mamba2 scan ---------------------------------------------------------------------------------

def _sequential_scan(x, dt, A, B, C, D, dt_bias, s0):
    """The recurrence token by token in float64: S = exp(dt A) S + dt x B^T; y = S C + D x."""
    x, dt, A, B, C, D, dt_bias = (t.double() for t in (x, dt, A, B, C, D, dt_bias))
    T, H, P = x.shape
    rep = H // B.shape[1]
    dt = F.softplus(dt + dt_bias)
    S = s0.double().clone()
    ys = []
    for t in range(T):
        for h in range(H):
            g = h // rep
            S[h] = torch.exp(dt[t, h] * A[h]) * S[h] + dt[t, h] * torch.outer(x[t, h], B[t, g])
        ys.append(torch.einsum("hpn,hn->hp", S, C[t].repeat_interleave(rep, 0)) + D[:, None] * x[t])
    return torch.stack(ys), S


def _scan_inputs(T, H=4, P=3, G=2, N=5):
    return dict(
        x=torch.randn(T, H, P),
        dt=torch.randn(T, H),
        A=-torch.rand(H) * 2 - 0.1,
        B=torch.randn(T, G, N),
        C=torch.randn(T, G, N),
        D=torch.randn(H),
        dt_bias=torch.randn(H) * 0.5,
    ), torch.randn(H, P, N)


@pytest.mark.parametrize("T,chunk", [(1, 4), (7, 4), (8, 4), (13, 5), (9, 16)])
def test_chunk_scan_equals_sequential_recurrence(T, chunk):
    inp, s0 = _scan_inputs(T)
    y, state = ref.mamba_chunk_scan(**inp, chunk_size=chunk, initial_state=s0)
    y_seq, s_seq = _sequential_scan(**inp, s0=s0)
    close(y.double(), y_seq, 1e-4)
    close(state.double(), s_seq, 1e-4)


def test_chunk_scan_without_initial_state_starts_from_zero():
    inp, s0 = _scan_inputs(6)
    y, state = ref.mamba_chunk_scan(**inp, chunk_size=4)
    y_seq, s_seq = _sequential_scan(**inp, s0=torch.zeros_like(s0))
    close(y.double(), y_seq, 1e-4)
    close(state.double(), s_seq, 1e-4)


def test_state_update_steps_equal_the_scan():
    T = 6
    inp, s0 = _scan_inputs(T)
    y_full, s_full = ref.mamba_chunk_scan(**inp, chunk_size=4, initial_state=s0)
    y_head, state = ref.mamba_chunk_scan(**{k: (v[:3] if v.shape[0] == T else v) for k, v in inp.items()},
                                         chunk_size=4, initial_state=s0)
    close(y_head, y_full[:3], 1e-4)
    state = state[None]
    for t in range(3, T):
        y, state = ref.mamba_state_update(state, inp["x"][t][None], inp["dt"][t][None], inp["A"], inp["B"][t][None],
                                          inp["C"][t][None], inp["D"], inp["dt_bias"])
        close(y[0], y_full[t], 1e-4)
    close(state[0], s_full, 1e-4)


def test_dt_limit_clamps_the_time_step():
    inp, s0 = _scan_inputs(3)
    inp["dt"] = torch.full_like(inp["dt"], -30.0)  # softplus ~ 0: without a floor nothing moves
    y_free, _ = ref.mamba_chunk_scan(**inp, chunk_size=4, initial_state=s0)
    y_floor, _ = ref.mamba_chunk_scan(**inp, chunk_size=4, initial_state=s0, dt_limit=(0.5, float("inf")))
    inp["dt"], inp["dt_bias"] = torch.full_like(inp["dt"], 0.5), None
    y_const, _ = ref.mamba_chunk_scan(**inp, chunk_size=4, initial_state=s0, dt_softplus=False)
    close(y_floor, y_const, 1e-5)
    assert not torch.allclose(y_free, y_floor)


# Paged attention -----------------------------------------------------------------------------

def _paged_setup(lengths, page_size=4, Hkv=2, D=8, num_pages=32):
    """Random K/V for each request scattered over shuffled pages; returns the dense copies too."""
    k_cache = torch.randn(num_pages, page_size, Hkv, D)
    v_cache = torch.randn(num_pages, page_size, Hkv, D)
    free = torch.randperm(num_pages).tolist()
    tables, dense = [], []
    for n in lengths:
        pages = [free.pop() for _ in range(-(-n // page_size))]
        tables.append(pages)
        k, v = torch.randn(n, Hkv, D), torch.randn(n, Hkv, D)
        slots = torch.tensor([pages[t // page_size] * page_size + t % page_size for t in range(n)])
        ref.kv_cache_write(k_cache, v_cache, slots, k, v)
        dense.append((k, v))
    width = max(len(t) for t in tables)
    table = torch.full((len(lengths), width), 10_000, dtype=torch.int32)  # unused entries: garbage
    for i, t in enumerate(tables):
        table[i, : len(t)] = torch.tensor(t, dtype=torch.int32)
    return k_cache, v_cache, table, dense


def _sdpa(q, k, v, prefix, window=None):
    """Dense reference: q [q, Hq, D] at positions prefix.., k/v [ctx, Hkv, D], GQA by repeat."""
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    qpos = torch.arange(prefix, prefix + q.shape[0])[:, None]
    kpos = torch.arange(k.shape[0])[None]
    mask = kpos <= qpos
    if window:
        mask &= kpos > qpos - window
    out = F.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), attn_mask=mask,
                                         scale=0.3)
    return out.transpose(0, 1)


def test_kv_cache_write_puts_tokens_in_their_pages():
    k_cache, v_cache, table, dense = _paged_setup([6], page_size=4)
    pages = table[0, :2].long()
    close(k_cache[pages].reshape(-1, 2, 8)[:6], dense[0][0])
    close(v_cache[pages].reshape(-1, 2, 8)[:6], dense[0][1])


@pytest.mark.parametrize("window", [None, 3])
def test_paged_prefill_with_cached_prefix_equals_dense_sdpa(window):
    ctx, qlens = [9, 5, 1], [4, 5, 1]  # request 0 has 5 cached tokens, 1 is a fresh prompt, 2 a single token
    k_cache, v_cache, table, dense = _paged_setup(ctx)
    q = torch.randn(sum(qlens), 4, 8)
    out = ref.paged_attention_prefill(q, k_cache, v_cache, table, qlens, ctx, scale=0.3, sliding_window=window)
    start = 0
    for (k, v), qn, c in zip(dense, qlens, ctx):
        close(out[start : start + qn], _sdpa(q[start : start + qn], k, v, c - qn, window))
        start += qn


@pytest.mark.parametrize("window", [None, 4])
def test_paged_decode_equals_dense_sdpa_per_request(window):
    ctx = [1, 7, 13]
    k_cache, v_cache, table, dense = _paged_setup(ctx)
    q = torch.randn(3, 4, 8)
    out = ref.paged_attention_decode(q, k_cache, v_cache, table, torch.tensor(ctx), scale=0.3, sliding_window=window)
    for i, ((k, v), c) in enumerate(zip(dense, ctx)):
        close(out[i : i + 1], _sdpa(q[i : i + 1], k, v, c - 1, window))
    # Decode is the prefill op's single-token case too.
    close(out, ref.paged_attention_prefill(q, k_cache, v_cache, table, [1, 1, 1], ctx, scale=0.3,
                                           sliding_window=window))


def _explicit(q, k, v, prefix, window, softcap, sinks):
    """Attention written out head by head: scores, optional soft-cap, mask, softmax with the sink
    logit in the denominator (a key whose value is zero)."""
    rep = q.shape[1] // k.shape[1]
    out = torch.zeros_like(q)
    for h in range(q.shape[1]):
        kh, vh = k[:, h // rep], v[:, h // rep]
        for i in range(q.shape[0]):
            p = prefix + i
            lo = 0 if window is None else max(0, p - window + 1)
            s = (kh[lo : p + 1] @ q[i, h]) * 0.3
            if softcap is not None:
                s = softcap * torch.tanh(s / softcap)
            e = torch.exp(s - s.max())
            denom = e.sum() + (torch.exp(sinks[h] - s.max()) if sinks is not None else 0.0)
            out[i, h] = (e / denom) @ vh[lo : p + 1]
    return out


@pytest.mark.parametrize("window,softcap,with_sinks", [(None, 2.0, False), (3, None, True), (4, 1.5, True)])
def test_paged_attention_softcap_and_sinks_equal_explicit_attention(window, softcap, with_sinks):
    ctx, qlens = [9, 5, 1], [4, 5, 1]
    k_cache, v_cache, table, dense = _paged_setup(ctx)
    sinks = torch.linspace(-1.0, 3.0, 4) if with_sinks else None
    q = torch.randn(sum(qlens), 4, 8) * 3  # large scores, so the soft-cap bends them
    out = ref.paged_attention_prefill(q, k_cache, v_cache, table, qlens, ctx, scale=0.3, sliding_window=window,
                                      softcap=softcap, sinks=sinks)
    start = 0
    for (k, v), qn, c in zip(dense, qlens, ctx):
        close(out[start : start + qn], _explicit(q[start : start + qn], k, v, c - qn, window, softcap, sinks))
        start += qn
    qd = q[:3]
    dec = ref.paged_attention_decode(qd, k_cache, v_cache, table, torch.tensor(ctx), scale=0.3,
                                     sliding_window=window, softcap=softcap, sinks=sinks)
    for i, ((k, v), c) in enumerate(zip(dense, ctx)):
        close(dec[i : i + 1], _explicit(qd[i : i + 1], k, v, c - 1, window, softcap, sinks))


# Rotary ----------------------------------------------------------------------------------------

def test_rotary_is_a_rotation_of_pairs():
    x, pos = torch.randn(5, 2, 8), torch.arange(5) * 3
    inv_freq = 1.0 / (10000 ** (torch.arange(0, 8, 2).float() / 8))
    out = ref.apply_rotary(x, pos, inv_freq)
    xc = torch.complex(x[..., :4], x[..., 4:])
    rot = xc * torch.polar(torch.ones(5, 1, 4), (pos[:, None] * inv_freq)[:, None, :])
    close(out, torch.cat([rot.real, rot.imag], dim=-1))


# MoE -------------------------------------------------------------------------------------------

def _route_by_hand(logits, bias, top_k, n_group, topk_group, norm, scale):
    """Token by token with Python sorting: the routing rule spelled out."""
    E = logits.shape[1]
    per = E // n_group
    weights, ids = [], []
    for row in logits:
        s = torch.sigmoid(row)
        c = s + bias
        gscore = [sorted(c[g * per : (g + 1) * per].tolist(), reverse=True)[:2] for g in range(n_group)]
        groups = sorted(range(n_group), key=lambda g: -sum(gscore[g]))[:topk_group]
        allowed = [e for e in range(E) if e // per in groups]
        chosen = sorted(allowed, key=lambda e: -c[e].item())[:top_k]
        w = s[chosen]
        if norm:
            w = w / w.sum()
        weights.append(w * scale)
        ids.append(chosen)
    return torch.stack(weights), torch.tensor(ids)


@pytest.mark.parametrize("n_group,topk_group,norm", [(1, 1, True), (4, 2, True), (4, 1, False)])
def test_sigmoid_grouped_routing_matches_the_rule(n_group, topk_group, norm):
    logits, bias = torch.randn(10, 16), torch.randn(16) * 0.3
    w, ids = ref.route_sigmoid_grouped(logits, bias, 3, n_group, topk_group, norm, 2.5)
    w_ref, ids_ref = _route_by_hand(logits, bias, 3, n_group, topk_group, norm, 2.5)
    order = ids.argsort(-1)
    order_ref = ids_ref.argsort(-1)
    assert torch.equal(ids.gather(1, order), ids_ref.gather(1, order_ref))
    close(w.gather(1, order), w_ref.gather(1, order_ref))


def test_correction_bias_changes_selection_not_weights():
    logits = torch.zeros(1, 4)
    bias = torch.tensor([0.0, 0.0, 5.0, 0.0])
    w, ids = ref.route_sigmoid_grouped(logits + torch.tensor([1.0, 0, 0, 0]), bias, 1, norm_topk_prob=False)
    assert ids.item() == 2 and abs(w.item() - 0.5) < 1e-6  # chosen by bias, weighted by sigmoid(0)


def test_softmax_routing():
    logits = torch.randn(6, 8)
    w, ids = ref.route_softmax(logits, 2)
    p = logits.softmax(-1)
    top = p.topk(2, -1)
    assert torch.equal(ids, top.indices)
    close(w, top.values / top.values.sum(-1, keepdim=True))


@pytest.mark.parametrize("gated", [False, True])
def test_moe_experts_equal_dense_mixture(gated):
    T, H, I, E, k = 7, 8, 6, 5, 2
    x = torch.randn(T, H)
    up, down = torch.randn(E, I, H), torch.randn(E, H, I)
    gate = torch.randn(E, I, H) if gated else None
    w, ids = ref.route_softmax(torch.randn(T, E), k)
    out = ref.moe_experts(x, w, ids, up, down, gate, act="silu" if gated else "relu2")
    dense = torch.zeros(T, E).scatter_add_(1, ids, w)  # routing weight of every expert, 0 if unchosen
    every = []
    for e in range(E):
        h = x @ up[e].t()
        h = F.silu(x @ gate[e].t()) * h if gated else F.relu(h) ** 2
        every.append(h @ down[e].t())
    close(out, torch.einsum("te,eth->th", dense, torch.stack(every)), 1e-4)


# Several sequences in one call ---------------------------------------------------------------

def test_conv1d_varlen_equals_one_call_per_sequence():
    C, K, lengths = 5, 4, [6, 1, 2, 9]
    w, b = torch.randn(C, K), torch.randn(C)
    x = torch.randn(sum(lengths), C)
    states = torch.randn(len(lengths), C, K - 1)
    states[1] = 0  # a fresh sequence
    starts = [0]
    for n in lengths:
        starts.append(starts[-1] + n)
    y, finals = ref.causal_conv1d_varlen(x, starts, w, b, states)
    for i in range(len(lengths)):
        yi, fi = ref.causal_conv1d(x[starts[i] : starts[i + 1]], w, b, states[i])
        close(y[starts[i] : starts[i + 1]], yi)
        close(finals[i], fi)


def test_chunk_scan_varlen_equals_one_call_per_sequence():
    lengths = [7, 1, 12, 3]
    inp, _ = _scan_inputs(sum(lengths))
    states = torch.randn(len(lengths), 4, 3, 5)
    starts = [0]
    for n in lengths:
        starts.append(starts[-1] + n)
    y, finals = ref.mamba_chunk_scan_varlen(**inp, seq_starts=starts, chunk_size=4, initial_states=states)
    for i in range(len(lengths)):
        sl = slice(starts[i], starts[i + 1])
        per = {k: (v[sl] if k in ("x", "dt", "B", "C") else v) for k, v in inp.items()}
        yi, si = ref.mamba_chunk_scan(**per, chunk_size=4, initial_state=states[i])
        close(y[sl], yi, 1e-4)
        close(finals[i], si, 1e-4)


def test_paged_prefill_groups_under_a_score_budget_give_the_same_answer():
    ctx, qlens = [9, 5, 12, 2], [4, 5, 12, 1]
    k_cache, v_cache, table, _ = _paged_setup(ctx)
    q = torch.randn(sum(qlens), 4, 8)
    one_group = ref.paged_attention_prefill(q, k_cache, v_cache, table, qlens, ctx, scale=0.3)
    one_each = ref.paged_attention_prefill(q, k_cache, v_cache, table, qlens, ctx, scale=0.3, max_scores=1)
    from bringup.kernels.reference.paged_attention_prefill import _groups

    assert _groups(qlens, ctx, 4, 1) == [[0], [1], [2], [3]]
    assert _groups(qlens, ctx, 4, 4 * 2 * 5 * 9) == [[0, 1], [2], [3]]
    close(one_group, one_each)
