"""Prefill attention over the paged KV cache through torch's scaled_dot_product_attention.

Same arguments and result as kernels.reference.paged_attention_prefill, which pads every request of
a group into one float32 score matrix (exact, but slow at prompt lengths of thousands). Here each
prompt chunk attends through SDPA in the model's dtype (flash or memory-efficient kernels, GQA
without repeating K/V): causal when the chunk is the whole context, a bottom-right causal mask when
it continues a cached prefix. Requests that bring one token (decodes riding in a mixed batch) go
together through the decode op. Sliding windows use the reference.
"""

from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F

from ..reference import paged_attention_prefill as _reference
from ..reference import paged_attention_decode as _reference_decode


def _decode_op(device: torch.device):
    if device.type in ("cuda", "xpu"):
        from ..triton.paged_attention_decode import paged_attention_decode

        return paged_attention_decode
    return _reference_decode


def paged_attention_prefill(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                            block_tables: torch.Tensor, query_lens: Sequence[int], context_lens: Sequence[int],
                            scale: float, sliding_window: int | None = None, max_scores: int | None = None):
    if sliding_window is not None:
        return _reference(q, k_cache, v_cache, block_tables, query_lens, context_lens, scale, sliding_window)
    from bringup.core.engine.forward_batch import upload

    page_size, Hkv, D = k_cache.shape[1:]
    Hq = q.shape[1]
    out = torch.empty(q.shape[0], Hq, v_cache.shape[-1], dtype=q.dtype, device=q.device)
    starts = [0]
    for n in query_lens:
        starts.append(starts[-1] + n)
    singles = [i for i, n in enumerate(query_lens) if n == 1]
    if singles:
        reqs, toks, ctx = upload([singles, [starts[i] for i in singles], [context_lens[i] for i in singles]],
                                 q.device)
        out[toks] = _decode_op(q.device)(q[toks], k_cache, v_cache, block_tables[reqs], ctx.int(), scale, None)
    gqa = Hq != Hkv
    for i, (n, c) in enumerate(zip(query_lens, context_lens)):
        if n == 1:
            continue
        lo = starts[i]
        pages = -(-c // page_size)
        table = block_tables[i, :pages].long()
        k = k_cache[table].reshape(-1, Hkv, D)[:c].transpose(0, 1)  # [Hkv, c, D]
        v = v_cache[table].reshape(-1, Hkv, v_cache.shape[-1])[:c].transpose(0, 1)
        qi = q[lo:lo + n].transpose(0, 1)  # [Hq, n, D]
        if n == c:
            o = F.scaled_dot_product_attention(qi, k, v, is_causal=True, scale=scale, enable_gqa=gqa)
        else:  # the chunk's token j sits at position c - n + j and sees positions up to it
            mask = (torch.arange(c, device=q.device)[None, :]
                    <= (c - n) + torch.arange(n, device=q.device)[:, None])
            o = F.scaled_dot_product_attention(qi, k, v, attn_mask=mask, scale=scale, enable_gqa=gqa)
        out[lo:lo + n] = o.transpose(0, 1)
    return out
