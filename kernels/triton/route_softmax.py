"""The Mixtral / Qwen-MoE router in one launch: softmax over the experts, the top k, optional
renormalisation over those k, the weights stored in the dtype asked (the model's, as transformers
rounds them), for one token per program. Unfused it takes five or six kernels (softmax, topk, sum,
div, the rounding). Reference: kernels/reference/moe_routing.py (route_softmax)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..reference import route_softmax as _reference_route
from .launch import next_pow2, num_warps


@triton.jit
def _route_softmax_kernel(logits_ptr, weights_ptr, ids_ptr, E, s_l,
                          TOP_K: tl.constexpr, K_POW2: tl.constexpr, E_POW2: tl.constexpr, NORM: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    e = tl.arange(0, E_POW2)
    ok = e < E
    logit = tl.load(logits_ptr + t * s_l + e, mask=ok, other=float("-inf")).to(tl.float32)
    p = tl.exp(logit - tl.max(logit, axis=0))
    prob = p / tl.sum(p, axis=0)
    choice = tl.where(ok, prob, -1.0)  # below every probability: padding lanes are never picked
    lanes = tl.arange(0, K_POW2)
    picked = tl.zeros([K_POW2], dtype=tl.float32)
    for j in tl.static_range(TOP_K):
        best = tl.argmax(choice, axis=0)  # ties to the lower expert, as torch.topk gives them
        w = tl.sum(tl.where(e == best, prob, 0.0), axis=0)
        picked = tl.where(lanes == j, w, picked)
        tl.store(ids_ptr + t * TOP_K + j, best.to(tl.int64))
        choice = tl.where(e == best, -2.0, choice)
    if NORM:
        picked = picked / tl.sum(picked, axis=0)
    tl.store(weights_ptr + t * TOP_K + lanes, picked.to(weights_ptr.dtype.element_ty), mask=lanes < TOP_K)


def route_softmax(router_logits, top_k, norm_topk_prob=True, weights_dtype=None):
    """Same results as the reference router (weights within float32 rounding)."""
    T, E = router_logits.shape
    if T == 0 or top_k > 64 or top_k > E:
        return _reference_route(router_logits, top_k, norm_topk_prob, weights_dtype)
    logits = router_logits if router_logits.stride(1) == 1 else router_logits.contiguous()
    weights = torch.empty(T, top_k, dtype=weights_dtype or torch.float32, device=logits.device)
    ids = torch.empty(T, top_k, dtype=torch.int64, device=logits.device)
    _route_softmax_kernel[(T,)](logits, weights, ids, E, logits.stride(0), TOP_K=top_k, K_POW2=next_pow2(top_k),
                                E_POW2=next_pow2(E, 16), NORM=bool(norm_topk_prob),
                                num_warps=num_warps(logits.device.type, 1))
    return weights, ids
