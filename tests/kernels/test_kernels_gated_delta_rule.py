"""The gated delta rule's two plain-torch forms (kernels/reference/gated_delta_rule.py) agree: the
chunked form (prefill) equals the token-by-token recurrence (decode) for any chunk length, with and
without an entering state, with grouped value heads; the varlen op equals each sequence on its
own, and the in-place decode step touches only its slots. transformers' own torch version checks
the recurrence itself."""

from __future__ import annotations

import inspect

import pytest
import torch

from bringup.kernels.reference import gated_delta_rule as gdr


def inputs(T, Hk=2, Hv=4, dk=8, dv=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(T, Hk, dk, generator=g), torch.randn(T, Hk, dk, generator=g), torch.randn(T, Hv, dv, generator=g),
            -torch.rand(T, Hv, generator=g) * 0.5, torch.rand(T, Hv, generator=g))


@pytest.mark.parametrize("T,chunk", [(1, 64), (7, 4), (37, 8), (40, 64)])
@pytest.mark.parametrize("with_state", [False, True])
def test_chunked_equals_recurrent(T, chunk, with_state):
    q, k, v, g, b = inputs(T)
    s0 = torch.randn(4, 8, 6) if with_state else None
    o1, s1 = gdr.gated_delta_rule_recurrent(q, k, v, g, b, s0)
    o2, s2 = gdr.gated_delta_rule_chunked(q, k, v, g, b, s0, chunk_size=chunk)
    torch.testing.assert_close(o2, o1, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(s2, s1, atol=1e-5, rtol=1e-5)


def test_a_sequence_in_two_pieces_equals_one():
    q, k, v, g, b = inputs(20)
    o, s = gdr.gated_delta_rule_chunked(q, k, v, g, b)
    oa, sa = gdr.gated_delta_rule_chunked(q[:9], k[:9], v[:9], g[:9], b[:9])
    ob, sb = gdr.gated_delta_rule_chunked(q[9:], k[9:], v[9:], g[9:], b[9:], sa)
    torch.testing.assert_close(torch.cat([oa, ob]), o, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(sb, s, atol=1e-5, rtol=1e-5)


def test_recurrence_matches_transformers():
    transformers = pytest.importorskip("transformers")
    from transformers.models.qwen3_next import modeling_qwen3_next as hf

    q, k, v, g, b = inputs(13)
    s0 = torch.randn(4, 8, 6)
    o, s = gdr.gated_delta_rule_recurrent(q, k, v, g, b, s0)
    # transformers' pure-torch function itself: its hub wrapper sends the call to flash-linear-attention
    # where that is installed, and 5.17's did so for CPU tensors too (a Triton error on the H200)
    recurrent = inspect.unwrap(hf.torch_recurrent_gated_delta_rule)
    ho, hs = recurrent(q[None], k[None], v[None], g[None], b[None], initial_state=s0[None],
                                                 output_final_state=True, use_qk_l2norm_in_kernel=True)
    torch.testing.assert_close(o, ho[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(s, hs[0], atol=1e-5, rtol=1e-5)


def test_varlen_op_equals_each_sequence_alone():
    q, k, v, g, b = inputs(18)
    starts = [0, 5, 6, 18]
    init = torch.randn(3, 4, 8, 6)
    o, finals = gdr.gated_delta_rule_chunk(q, k, v, g, b, starts, init)
    for i, (s, e) in enumerate(zip(starts[:-1], starts[1:])):
        oi, si = gdr.gated_delta_rule_recurrent(q[s:e], k[s:e], v[s:e], g[s:e], b[s:e], init[i])
        torch.testing.assert_close(o[s:e], oi, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(finals[i], si, atol=1e-5, rtol=1e-5)


def test_in_place_decode_step_updates_only_its_slots():
    q, k, v, g, b = inputs(2)
    pool = torch.randn(5, 4, 8, 6)
    before = pool.clone()
    slots = torch.tensor([3, 1])
    o = gdr.gated_delta_rule_recurrent_inplace(q, k, v, g, b, pool, slots)
    for i, slot in enumerate([3, 1]):
        oi, si = gdr.gated_delta_rule_recurrent(q[i:i + 1], k[i:i + 1], v[i:i + 1], g[i:i + 1], b[i:i + 1], before[slot])
        torch.testing.assert_close(o[i], oi[0], atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(pool[slot], si, atol=1e-6, rtol=1e-6)
    for slot in (0, 2, 4):
        assert torch.equal(pool[slot], before[slot])


def test_value_heads_must_be_a_multiple_of_key_heads():
    q, k, v, g, b = inputs(3, Hk=3, Hv=4)
    with pytest.raises(ValueError, match="not a multiple of 3 key heads"):
        gdr.gated_delta_rule_recurrent(q, k, v, g, b)
