"""Fused gated (GLU) MoE in Triton: SwiGLU experts (Qwen3-MoE) and gpt-oss's clamped SwiGLU on
interleaved gate/up columns with biases, reading only the routed experts, with no read back to the
host (graph-safe at every batch size). Reference: kernels/reference/moe_gated_experts.py.

`moe_gated_experts` chains the one-launch sort (fused_moe.moe_align) -> the gated up GEMM (gate and up
products of each block of sorted rows at once, their biases and the activation in the epilogue) ->
the down GEMM (fused_moe's grouped GEMM, its bias, then the routing weight) -> the sum over k; at
decode sizes two launches with no sort instead: the touched experts spread over every SM
(moe_gated_split.py), or a program per expert that finds its own rows (moe_gated_grouped.py), each
touched expert read once by both, or a GEMV per assignment (moe_gated_gemv.py). Which form runs is
timed on the device per decode-graph batch size (moe_gated_forms.py), `decode_form`'s estimate from
the shapes where nothing is timed.
gate and up are read through their strides; gpt-oss's interleaved [E, H, 2I] tensor (its two views) is
read as the one tensor it is, in contiguous tiles split into gate and up in registers
(gate_up_layout.py: through the stride-2 views every weight element was its own 2-byte load).
`router_topk_softmax`: gpt-oss's router in one launch per token (logits in float32 with the bias, top k,
softmax over the k).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..reference.moe_gated_experts import GATED_ACTS
from ..reference.moe_gated_experts import moe_gated_experts as _reference_gated
from ..reference.moe_gated_experts import router_topk_softmax as _reference_router
from .fused_moe import block_m_for, block_tile, moe_align, moe_grouped_gemm, tile_for
from .gate_up_layout import gated_products, interleaved
from .launch import next_pow2, num_warps
from .moe_gated_forms import DecodeForms, LayerShape
from .moe_gated_gemv import GEMV_MAX_TOKENS, biased_gated_act, moe_gated_gemv_unsummed
from .moe_gated_grouped import moe_gated_grouped_unsummed
from .moe_gated_split import SPLIT_MAX_TOKENS, moe_gated_split_unsummed

_GATED = {name: i for i, name in enumerate(GATED_ACTS)}  # "silu": 0, "swiglu_clamped": 1


@triton.jit(do_not_specialize=["num_assignments"])
def _gated_up_kernel(x_ptr, g_ptr, u_ptr, gb_ptr, ub_ptr, out_ptr, sorted_ptr, block_expert_ptr,
                     N, K, num_assignments, rows_per_token, alpha, limit,
                     s_xm, s_xk, s_ge, s_gn, s_gk, s_ue, s_un, s_uk, s_gbe, s_gbn, s_ube, s_ubn, s_om, s_on,
                     ACT: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_LIMIT: tl.constexpr, INTERLEAVED: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    e = tl.load(block_expert_ptr + pid_m).to(tl.int64)  # -1: a block past the last expert's rows
    if e < 0:
        return
    a, valid, x_rows, cols, col_ok = block_tile(x_ptr, sorted_ptr, pid_m, pid_n, N, num_assignments, rows_per_token,
                                                s_xm, BLOCK_M, BLOCK_N)
    acc_g, acc_u = gated_products(x_rows, valid, g_ptr, u_ptr, e, pid_n, N, K, s_xk, s_ge, s_gn, s_gk, s_ue, s_un,
                                  s_uk, INTERLEAVED, BLOCK_M, BLOCK_N, BLOCK_K)
    h = biased_gated_act(acc_g, acc_u, gb_ptr, ub_ptr, e, cols, col_ok, s_gbe, s_gbn, s_ube, s_ubn,
                         alpha, limit, ACT, HAS_BIAS, HAS_LIMIT)
    dest = out_ptr + a.to(tl.int64)[:, None] * s_om + cols[None, :] * s_on
    tl.store(dest, h.to(out_ptr.dtype.element_ty), mask=valid[:, None] & col_ok[None, :])


def gated_up(x, gate, up, gate_bias, up_bias, sorted_ids, block_expert, block: int, num_assignments: int,
             rows_per_token: int, act: str, alpha: float, limit: float | None) -> torch.Tensor:
    """[T*k, I]: act(x @ gate[e]^T + gate_bias[e], x @ up[e]^T + up_bias[e]) per assignment, in x's dtype."""
    E, N, K = gate.shape
    out = torch.empty(num_assignments, N, dtype=x.dtype, device=x.device)
    block_n, block_k, warps, stages = tile_for(num_assignments, N, K)
    has_bias = gate_bias is not None or up_bias is not None
    gb = gate_bias if gate_bias is not None else torch.zeros(E, N, dtype=x.dtype, device=x.device) if has_bias else x
    ub = up_bias if up_bias is not None else torch.zeros(E, N, dtype=x.dtype, device=x.device) if has_bias else x
    grid = (block_expert.numel(), triton.cdiv(N, block_n))
    _gated_up_kernel[grid](x, gate, up, gb, ub, out, sorted_ids, block_expert, N, K, num_assignments, rows_per_token,
                           float(alpha), float(limit or 0.0), x.stride(0), x.stride(1), *gate.stride(), *up.stride(),
                           gb.stride(0), gb.stride(1), ub.stride(0), ub.stride(1), out.stride(0), out.stride(1),
                           ACT=_GATED[act], HAS_BIAS=has_bias, HAS_LIMIT=limit is not None,
                           INTERLEAVED=interleaved(gate, up), BLOCK_M=block, BLOCK_N=block_n, BLOCK_K=block_k,
                           num_warps=num_warps(x.device.type, warps), num_stages=stages)
    return out


# The expert-by-expert form (moe_gated_grouped.py) while an expert gets few rows on average (its BLOCK_M of 16
# holds them in one pass) and the router's ids are few enough for each program to scan; above, the
# sorted chain (its align pays off, and larger row blocks).
GROUPED_MAX_ROWS_PER_EXPERT = 8
GROUPED_MAX_ASSIGNMENTS = 1024
FORMS = ("gemv", "split", "grouped", "sorted")
FORM_OVERRIDE: dict = {}  # {"form": one of FORMS}: bench/decode_fusions_gpu.py and the tests run each form


# Up to this many tokens the estimate takes the split form (moe_gated_split.py), from its own estimate
# (its docstring); where the device times the forms (moe_gated_forms.py) the estimate is only the fallback.
SPLIT_UP_TO_TOKENS = 4


def decode_form(tokens: int, top_k: int, experts: int) -> str:
    """The estimate of which form runs T tokens' T * k assignments over E experts, by the shapes alone
    (where the forms are not timed: moe_gated_forms.py):
    - "split": up to SPLIT_UP_TO_TOKENS tokens, a program per (router slot, column block[, K split]),
      only the first slot of each touched expert working (moe_gated_split.py: the few touched experts
      spread over every SM, no program for an untouched one);
    - "grouped": one program per expert and column block (each expert read once), while an expert gets
      at most GROUPED_MAX_ROWS_PER_EXPERT rows on average and n <= GROUPED_MAX_ASSIGNMENTS;
    - "sorted": the align kernel and the two sorted grouped GEMMs (prefill).
    The GEMV form (one program per assignment, moe_gated_gemv.py) is chosen at no size: on the H200
    (bench/decode_fusions_gpu.py, gpt-oss's E 32, top 4, 2880 x 2880, bf16, eager, ms per call) grouped
    beat it at every token count measured: 1 token 0.153 vs 0.334, 4: 0.256 vs 0.443, 8: 0.377 vs 0.815,
    16: 0.392 vs 1.268, 32: 0.449 vs 2.248 (notes/h200-0304.md). It stays for FORM_OVERRIDE and
    is timed beside the others up to its GEMV_MAX_TOKENS."""
    if "form" in FORM_OVERRIDE:
        return FORM_OVERRIDE["form"]
    n = tokens * top_k
    if tokens <= SPLIT_UP_TO_TOKENS:
        return "split"
    if n <= GROUPED_MAX_ROWS_PER_EXPERT * experts and n <= GROUPED_MAX_ASSIGNMENTS:
        return "grouped"
    return "sorted"


DECODE_FORMS = DecodeForms()  # the engine names the decode graphs' batch sizes (DecodeForms.measure_at)


def form_candidates(tokens: int, top_k: int, experts: int, paired_biases: bool) -> list[str]:
    """The forms that can run any token count up to `tokens` (the estimate's first): the GEMV up to
    its GEMV_MAX_TOKENS (one program per assignment: it only grows from there) and where gate and up
    both have a bias or neither, split up to SPLIT_MAX_TOKENS, grouped up to GROUPED_MAX_ASSIGNMENTS."""
    fits = {"gemv": tokens <= GEMV_MAX_TOKENS and paired_biases, "split": tokens <= SPLIT_MAX_TOKENS,
            "grouped": tokens * top_k <= GROUPED_MAX_ASSIGNMENTS, "sorted": True}
    first = decode_form(tokens, top_k, experts)
    return [first] + [form for form in FORMS if fits[form] and form != first]


def _random_routing(weights, ids, experts: int):
    """k distinct experts per token drawn at random (what the forms are timed on)."""
    T, k = ids.shape
    drawn = torch.rand(T, experts, device=ids.device).argsort(dim=1)[:, :k].to(ids.dtype)
    return torch.full_like(weights, 1.0 / k), drawn


def moe_gated_experts(x, weights, ids, gate, up, down, act="silu", gate_bias=None, up_bias=None, down_bias=None,
                      alpha=1.702, limit=None):
    """Same arguments and result as kernels.reference.moe_gated_experts."""
    if act not in _GATED or x.shape[0] == 0:
        return _reference_gated(x, weights, ids, gate, up, down, act, gate_bias, up_bias, down_bias, alpha, limit)
    return moe_gated_experts_unsummed(x, weights, ids, gate, up, down, act, gate_bias, up_bias, down_bias, alpha,
                                      limit).sum(1)


def moe_gated_experts_unsummed(x, weights, ids, gate, up, down, act="silu", gate_bias=None, up_bias=None,
                               down_bias=None, alpha=1.702, limit=None):
    """[T, k, H]: each assignment's weighted expert output; the sum over k is left to the caller (the
    model's next residual add + norm does it in its own kernel: one launch less per layer)."""
    if act not in _GATED or x.shape[0] == 0:
        return _reference_gated(x, weights, ids, gate, up, down, act, gate_bias, up_bias, down_bias, alpha,
                                limit)[:, None, :]
    T, k = ids.shape
    E = gate.shape[0]
    if "form" in FORM_OVERRIDE:
        form = FORM_OVERRIDE["form"]
    else:
        paired = (gate_bias is None) == (up_bias is None)
        shapes = LayerShape(E, k, gate.shape[1], gate.shape[2], down.shape[1], act, gate_bias is not None,
                            str(x.dtype).removeprefix("torch."), interleaved(gate, up))

        def timed(f):
            w, i = _random_routing(weights, ids, E)
            _run_form(f, x, w, i, gate, up, down, act, gate_bias, up_bias, down_bias, alpha, limit)

        form = DECODE_FORMS.choose(x.device, T, shapes, lambda t: decode_form(t, k, E),
                                   lambda t: form_candidates(t, k, E, paired), timed)
    return _run_form(form, x, weights, ids, gate, up, down, act, gate_bias, up_bias, down_bias, alpha, limit)


def _run_form(form, x, weights, ids, gate, up, down, act, gate_bias, up_bias, down_bias, alpha, limit):
    """[T, k, H] in `form` (one of FORMS; one that cannot run these shapes falls to the next that can)."""
    T, k = ids.shape
    E, n = gate.shape[0], ids.numel()
    if form == "gemv" and (gate_bias is None) == (up_bias is None):  # two launches, no sort
        return moe_gated_gemv_unsummed(x, weights, ids, gate, up, down, _GATED[act], gate_bias, up_bias, down_bias,
                                       alpha, limit)
    if form == "split" and T <= SPLIT_MAX_TOKENS:  # two launches over the whole device, each expert read once
        return moe_gated_split_unsummed(x, weights, ids, gate, up, down, _GATED[act], gate_bias, up_bias, down_bias,
                                        alpha, limit)
    if form in ("gemv", "split", "grouped"):  # two launches, no sort, each expert read once
        return moe_gated_grouped_unsummed(x, weights, ids, gate, up, down, _GATED[act], gate_bias, up_bias,
                                          down_bias, alpha, limit)
    block = block_m_for(n, E)
    sorted_ids, block_expert, _used = moe_align(ids, E, block)
    h = gated_up(x, gate, up, gate_bias, up_bias, sorted_ids, block_expert, block, n, k, act, alpha, limit)
    y = moe_grouped_gemm(h, down, sorted_ids, block_expert, block, n, 1, act=None, weights=weights, bias=down_bias)
    return y.view(T, k, -1)


@triton.jit
def _router_kernel(x_ptr, w_ptr, b_ptr, weights_ptr, ids_ptr, E, H, s_x, s_we,
                   TOP_K: tl.constexpr, K_POW2: tl.constexpr, E_POW2: tl.constexpr, HAS_BIAS: tl.constexpr,
                   BLOCK_K: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    e = tl.arange(0, E_POW2)
    e_ok = e < E
    acc = tl.zeros([E_POW2, BLOCK_K], dtype=tl.float32)
    for k0 in range(0, H, BLOCK_K):
        k = k0 + tl.arange(0, BLOCK_K)
        k_ok = k < H
        xv = tl.load(x_ptr + t * s_x + k, mask=k_ok, other=0.0).to(tl.float32)
        wv = tl.load(w_ptr + e[:, None] * s_we + k[None, :], mask=e_ok[:, None] & k_ok[None, :], other=0.0)
        acc += wv.to(tl.float32) * xv[None, :]
    logit = tl.sum(acc, axis=1)
    if HAS_BIAS:
        logit += tl.load(b_ptr + e, mask=e_ok, other=0.0).to(tl.float32)
    logit = tl.where(e_ok, logit, float("-inf"))
    lanes = tl.arange(0, K_POW2)
    top = tl.full([K_POW2], float("-inf"), dtype=tl.float32)
    for j in tl.static_range(TOP_K):
        best = tl.argmax(logit, axis=0)
        top = tl.where(lanes == j, tl.max(logit, axis=0), top)
        tl.store(ids_ptr + t * TOP_K + j, best.to(tl.int64))
        logit = tl.where(e == best, float("-inf"), logit)
    p = tl.exp(top - tl.max(top, axis=0))  # lanes past k hold -inf: exp gives 0
    tl.store(weights_ptr + t * TOP_K + lanes, p / tl.sum(p, axis=0), mask=lanes < TOP_K)


ROUTER_MAX_TOKENS = 256  # one program per token; above, cuBLAS's product through the reference is as good


def router_topk_softmax(hidden, weight, bias, top_k):
    """Same as kernels.reference.router_topk_softmax, in one launch at decode sizes."""
    T, H = hidden.shape
    E = weight.shape[0]
    if T == 0 or T > ROUTER_MAX_TOKENS or top_k > E or E > 256 or hidden.stride(1) != 1 or weight.stride(1) != 1:
        return _reference_router(hidden, weight, bias, top_k)
    weights = torch.empty(T, top_k, dtype=torch.float32, device=hidden.device)
    ids = torch.empty(T, top_k, dtype=torch.int64, device=hidden.device)
    e_pow2 = next_pow2(E, 16)
    _router_kernel[(T,)](hidden, weight, bias if bias is not None else weight, weights, ids, E, H, hidden.stride(0),
                         weight.stride(0), TOP_K=top_k, K_POW2=next_pow2(top_k), E_POW2=e_pow2,
                         HAS_BIAS=bias is not None, BLOCK_K=max(16, 4096 // e_pow2),
                         num_warps=num_warps(hidden.device.type, 4))
    return weights, ids
