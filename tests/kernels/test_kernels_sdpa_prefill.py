"""Prefill attention through torch's SDPA against the padded float32 reference, on the CPU: fresh
prompts, chunks continuing a cached prefix, and decodes riding in the same batch."""

from __future__ import annotations

import pytest
import torch

from bringup.kernels import reference as ref
from bringup.kernels.sdpa.paged_attention_prefill import paged_attention_prefill


def test_sdpa_prefill_matches_the_reference_on_a_mixed_batch():
    torch.manual_seed(0)
    num_pages, page, Hkv, Hq, D = 40, 4, 2, 8, 16
    k_cache = torch.randn(num_pages, page, Hkv, D, dtype=torch.float64)
    v_cache = torch.randn(num_pages, page, Hkv, D, dtype=torch.float64)
    query_lens = [7, 1, 5, 1, 9]
    context_lens = [7, 12, 14, 3, 9]  # fresh, decode, continued chunk, decode, fresh
    perm = torch.randperm(num_pages)
    tables, used = [], 0
    for c in context_lens:
        n = -(-c // page)
        tables.append(perm[used:used + n].tolist() + [0] * (8 - n))
        used += n
    block_tables = torch.tensor(tables, dtype=torch.int32)
    q = torch.randn(sum(query_lens), Hq, D, dtype=torch.float64)
    got = paged_attention_prefill(q, k_cache, v_cache, block_tables, query_lens, context_lens, 0.25)
    want = ref.paged_attention_prefill(q, k_cache, v_cache, block_tables, query_lens, context_lens, 0.25)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)  # the reference computes in float32


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the flash / memory-efficient SDPA kernels need a CUDA device")
def test_sdpa_prefill_on_the_gpu_matches_the_reference_in_bfloat16():
    torch.manual_seed(1)
    num_pages, page, Hkv, Hq, D = 300, 16, 2, 32, 128
    k_cache = torch.randn(num_pages, page, Hkv, D, device="cuda", dtype=torch.bfloat16)
    v_cache = torch.randn(num_pages, page, Hkv, D, device="cuda", dtype=torch.bfloat16)
    query_lens, context_lens = [1024, 1, 700, 1], [1024, 40, 1500, 9]
    perm = torch.randperm(num_pages).tolist()
    tables, used = [], 0
    for c in context_lens:
        n = -(-c // page)
        tables.append(perm[used:used + n] + [0] * (100 - n))
        used += n
    block_tables = torch.tensor(tables, dtype=torch.int32, device="cuda")
    q = torch.randn(sum(query_lens), Hq, D, device="cuda", dtype=torch.bfloat16)
    got = paged_attention_prefill(q, k_cache, v_cache, block_tables, query_lens, context_lens, D ** -0.5)
    want = ref.paged_attention_prefill(q, k_cache, v_cache, block_tables, query_lens, context_lens, D ** -0.5)
    err = ((got.float() - want.float()).norm() / want.float().norm()).item()
    assert torch.isfinite(got).all() and err < 2e-2, err


@pytest.mark.parametrize("softcap,with_sinks", [(5.0, False), (None, True), (5.0, True)])
def test_sdpa_prefill_honours_softcap_and_sinks(softcap, with_sinks):
    # Gemma 2 and gpt-oss pass these on a GPU (SDPA is the prefill op there); dropping them was a TypeError.
    torch.manual_seed(2)
    num_pages, page, Hkv, Hq, D = 20, 4, 2, 4, 8
    k_cache = torch.randn(num_pages, page, Hkv, D) * 3
    v_cache = torch.randn(num_pages, page, Hkv, D)
    query_lens, context_lens = [6, 1, 3], [6, 9, 10]
    block_tables = torch.randperm(num_pages)[:9].view(3, 3).int()
    q = torch.randn(sum(query_lens), Hq, D) * 3
    sinks = torch.randn(Hq) if with_sinks else None
    got = paged_attention_prefill(q, k_cache, v_cache, block_tables, query_lens, context_lens, 0.5,
                                  softcap=softcap, sinks=sinks)
    want = ref.paged_attention_prefill(q, k_cache, v_cache, block_tables, query_lens, context_lens, 0.5,
                                       softcap=softcap, sinks=sinks)
    plain = ref.paged_attention_prefill(q, k_cache, v_cache, block_tables, query_lens, context_lens, 0.5)
    torch.testing.assert_close(got, want)
    assert not torch.allclose(want, plain)  # the options change the answer, so the check means something
