"""Prefill attention over the paged KV cache through torch's scaled_dot_product_attention.

Same arguments and result as kernels.reference.paged_attention_prefill, which pads every request of
a group into one float32 score matrix (exact, but slow at prompt lengths of thousands). Here each
prompt chunk attends through SDPA in the model's dtype with a bottom-right causal bias (the chunk's
last token sees the whole context), which the flash and memory-efficient kernels take; K/V heads
are repeated for GQA (torch 2.11 sends enable_gqa to the slow math kernel, as seen on an H200). Requests that bring one token (decodes riding in a mixed batch) go
together through the decode op. Sliding windows, Gemma 2's soft-cap and gpt-oss's sinks use the
reference: SDPA's fused kernels can neither cap the scores nor add a sink to the softmax.
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
    if device.type == "cpu":
        from ..cpu.paged_attention_decode import paged_attention_decode

        return paged_attention_decode
    return _reference_decode


def paged_attention_prefill(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                            block_tables: torch.Tensor, query_lens: Sequence[int], context_lens: Sequence[int],
                            scale: float, sliding_window: int | None = None, max_scores: int | None = None,
                            softcap: float | None = None, sinks: torch.Tensor | None = None):
    if sliding_window is not None or softcap is not None or sinks is not None:
        return _reference(q, k_cache, v_cache, block_tables, query_lens, context_lens, scale, sliding_window,
                          softcap=softcap, sinks=sinks)
    page_size, Hkv, D = k_cache.shape[1:]
    Hq = q.shape[1]
    out = torch.empty(q.shape[0], Hq, v_cache.shape[-1], dtype=q.dtype, device=q.device)
    starts = [0]
    for n in query_lens:
        starts.append(starts[-1] + n)
    singles = [i for i, n in enumerate(query_lens) if n == 1]
    if singles:
        host = torch.tensor(singles + [starts[i] for i in singles] + [context_lens[i] for i in singles],
                            device="cpu")  # (pinned below: a host tensor whatever torch's default device)
        if q.device.type == "cuda":  # one asynchronous copy: the host does not wait for the device
            host = host.pin_memory()
        reqs, toks, ctx = host.to(q.device, non_blocking=True).split(len(singles))
        out[toks] = _decode_op(q.device)(q[toks], k_cache, v_cache, block_tables[reqs], ctx.int(), scale, None)
    rep = Hq // Hkv
    for i, (n, c) in enumerate(zip(query_lens, context_lens)):
        if n == 1:
            continue
        lo = starts[i]
        pages = -(-c // page_size)
        table = block_tables[i, :pages].long()
        k = k_cache[table].reshape(-1, Hkv, D)[:c].transpose(0, 1)  # [Hkv, c, D]
        v = v_cache[table].reshape(-1, Hkv, v_cache.shape[-1])[:c].transpose(0, 1)
        if rep > 1:
            k, v = k.repeat_interleave(rep, dim=0), v.repeat_interleave(rep, dim=0)
        qi = q[lo:lo + n].transpose(0, 1)[None]  # [1, Hq, n, D]
        o = F.scaled_dot_product_attention(qi, k[None], v[None], scale=scale, **_causal(n, c))
        out[lo:lo + n] = o[0].transpose(0, 1)
    return out


def _causal(n: int, c: int) -> dict:
    """The chunk's token j sits at position c - n + j and sees positions up to it: a whole prompt
    (n == c) is SDPA's own causal mask; a later chunk needs the bottom-right bias, whose module
    imports torch._dynamo (70 MiB of resident memory a CPU engine otherwise never loads)."""
    if n == c:
        return {"is_causal": True}
    from torch.nn.attention.bias import causal_lower_right

    return {"attn_mask": causal_lower_right(n, c)}
