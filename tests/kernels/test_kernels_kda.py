"""Kimi Delta Attention's two plain-torch forms (kernels/reference/kda.py) agree: the chunked form
(prefill) equals the token-by-token recurrence (decode) for any chunk length, with and without an
entering state, with grouped value heads and fast-decaying channels; the varlen op equals each
sequence on its own, and the in-place decode step touches only its slots. transformers' own torch
versions (recurrent and chunked) check the recurrence itself."""

from __future__ import annotations

import inspect

import pytest
import torch

from bringup.kernels.reference import kda


def inputs(T, Hk=2, Hv=4, dk=8, dv=6, seed=0, decay=0.5):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(T, Hk, dk, generator=g), torch.randn(T, Hk, dk, generator=g),
            torch.randn(T, Hv, dv, generator=g), -torch.rand(T, Hv, dk, generator=g) * decay,
            torch.rand(T, Hv, generator=g))


@pytest.mark.parametrize("T,chunk", [(1, 32), (7, 4), (37, 8), (40, 32)])
@pytest.mark.parametrize("with_state", [False, True])
def test_chunked_equals_recurrent(T, chunk, with_state):
    q, k, v, g, b = inputs(T)
    s0 = torch.randn(4, 8, 6) if with_state else None
    o1, s1 = kda.kda_recurrent(q, k, v, g, b, s0)
    o2, s2 = kda.kda_chunked(q, k, v, g, b, s0, chunk_size=chunk)
    torch.testing.assert_close(o2, o1, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(s2, s1, atol=1e-5, rtol=1e-5)


def test_fast_decaying_channels_stay_finite():
    """Log decays of -30 per token: e^{-G} alone would overflow float32 within a chunk."""
    q, k, v, g, b = inputs(40, decay=30.0)
    o1, s1 = kda.kda_recurrent(q, k, v, g, b)
    o2, s2 = kda.kda_chunked(q, k, v, g, b)
    assert torch.isfinite(o2).all() and torch.isfinite(s2).all()
    torch.testing.assert_close(o2, o1, atol=1e-5, rtol=1e-5)


def test_per_channel_decay_is_not_a_per_head_one():
    """With the same decay in every channel, KDA is the gated delta rule; with different ones it is not."""
    from bringup.kernels.reference import gated_delta_rule as gdr

    q, k, v, g, b = inputs(9)
    flat = g[..., :1].expand_as(g).contiguous()
    torch.testing.assert_close(kda.kda_recurrent(q, k, v, flat, b)[0],
                               gdr.gated_delta_rule_recurrent(q, k, v, g[..., 0], b)[0], atol=1e-6, rtol=1e-6)
    assert not torch.allclose(kda.kda_recurrent(q, k, v, g, b)[0], kda.kda_recurrent(q, k, v, flat, b)[0], atol=1e-3)


def test_a_sequence_in_two_pieces_equals_one():
    q, k, v, g, b = inputs(20)
    o, s = kda.kda_chunked(q, k, v, g, b)
    oa, sa = kda.kda_chunked(q[:9], k[:9], v[:9], g[:9], b[:9])
    ob, sb = kda.kda_chunked(q[9:], k[9:], v[9:], g[9:], b[9:], sa)
    torch.testing.assert_close(torch.cat([oa, ob]), o, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(sb, s, atol=1e-5, rtol=1e-5)


def test_recurrence_and_chunks_match_transformers():
    pytest.importorskip("transformers")
    from transformers.models.kimi_linear import modeling_kimi_linear as hf

    q, k, v, g, b = inputs(13, Hk=4)  # transformers' torch versions have one q/k head per value head
    s0 = torch.randn(4, 8, 6)
    o, s = kda.kda_recurrent(q, k, v, g, b, s0)
    # transformers' pure-torch functions themselves: a hub wrapper may send the call to
    # flash-linear-attention where that is installed (transformers 5.17 did so for CPU tensors too)
    for fn in map(inspect.unwrap, (hf.recurrent_kimi_delta_attention, hf.chunk_kimi_delta_attention)):
        ho, hs = fn(q[None], k[None], v[None], g=g[None], beta=b[None], initial_state=s0[None],
                    output_final_state=True, use_qk_l2norm_in_kernel=True)
        torch.testing.assert_close(o, ho[0], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(s, hs[0], atol=1e-5, rtol=1e-5)


def test_varlen_op_equals_each_sequence_alone():
    q, k, v, g, b = inputs(18)
    starts = [0, 5, 6, 18]
    init = torch.randn(3, 4, 8, 6)
    o, finals = kda.kda_chunk(q, k, v, g, b, starts, init)
    for i, (s, e) in enumerate(zip(starts[:-1], starts[1:])):
        oi, si = kda.kda_recurrent(q[s:e], k[s:e], v[s:e], g[s:e], b[s:e], init[i])
        torch.testing.assert_close(o[s:e], oi, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(finals[i], si, atol=1e-5, rtol=1e-5)


def test_in_place_decode_step_updates_only_its_slots():
    q, k, v, g, b = inputs(2)
    pool = torch.randn(5, 4, 8, 6)
    before = pool.clone()
    o = kda.kda_recurrent_inplace(q, k, v, g, b, pool, torch.tensor([3, 1]))
    for i, slot in enumerate([3, 1]):
        oi, si = kda.kda_recurrent(q[i:i + 1], k[i:i + 1], v[i:i + 1], g[i:i + 1], b[i:i + 1], before[slot])
        torch.testing.assert_close(o[i], oi[0], atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(pool[slot], si, atol=1e-6, rtol=1e-6)
    for slot in (0, 2, 4):
        assert torch.equal(pool[slot], before[slot])


def test_bad_shapes_are_refused_with_the_reason():
    q, k, v, g, b = inputs(3, Hk=3, Hv=4)
    with pytest.raises(ValueError, match="multiple"):
        kda.kda_recurrent(q, k, v, g, b)
    q, k, v, g, b = inputs(3)
    with pytest.raises(ValueError, match="channels"):
        kda.kda_recurrent(q, k, v, g[..., :4], b)
