"""Fused MoE in Triton: only the routed experts' weights are read, at every batch size.

Three kernels, each with its plain reference in kernels/reference/:
- `moe_align` (reference/moe_align.py): one program sorts the T*k (token, expert) assignments into
  per-expert runs padded to blocks of BLOCK_M rows, all on the device (no read back, graph-safe).
- `moe_grouped_gemm` (reference/moe_grouped_gemm.py): each block of sorted rows times its own
  expert's matrix; the activation (relu2 for NemotronH) or the routing weight is applied in the
  epilogue, and each row lands at its assignment's place.
- `route_sigmoid_grouped` (reference/moe_routing.py, one group): sigmoid, correction bias, top-k,
  renormalisation and scaling for one token per program.
`moe_experts` chains align -> up GEMM (+act) -> down GEMM (x routing weight) -> sum over k; it has
the reference `moe_experts`'s signature. Experts with a gate and SiLU (SwiGLU: Kimi-Linear, Jamba,
MiniMax) go to the fused gated MoE (fused_moe_gated.py, the same layouts); other gated ones use the
reference.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..reference.moe_align import padded_rows
from ..reference import moe_experts as _reference_moe
from ..reference import route_sigmoid_grouped as _reference_route
from ..reference import router_logits as _reference_router_logits
from .launch import next_pow2, num_warps

# Activations the GEMM epilogue can apply (0: none).
_ACT = {None: 0, "relu2": 1, "relu": 2, "silu": 3}


@triton.jit
def activate(acc, ACT: tl.constexpr):
    """The epilogue's activation, by `_ACT` code (0: none)."""
    if ACT == 1:
        acc = tl.maximum(acc, 0.0)
        acc = acc * acc
    elif ACT == 2:
        acc = tl.maximum(acc, 0.0)
    elif ACT == 3:
        acc = acc * tl.sigmoid(acc)
    return acc


# Token counts change every step; they are bounds, not strides, so they are not specialized on
# (each divisibility by 16 would be its own compile in the middle of serving).
@triton.jit(do_not_specialize=["n", "R"])
def _align_kernel(ids_ptr, sorted_ptr, block_expert_ptr, used_ptr, n, R,
                  E: tl.constexpr, E_POW2: tl.constexpr, BLOCK: tl.constexpr, CHUNK: tl.constexpr):
    experts = tl.arange(0, E_POW2)
    # 1. per-expert counts
    counts = tl.zeros([E_POW2], dtype=tl.int32)
    for start in range(0, n, CHUNK):
        offs = start + tl.arange(0, CHUNK)
        e = tl.load(ids_ptr + offs, mask=offs < n, other=-1).to(tl.int32)
        counts += tl.sum((e[:, None] == experts[None, :]).to(tl.int32), axis=0)
    padded = (counts + BLOCK - 1) // BLOCK * BLOCK
    ends = tl.cumsum(padded, axis=0)
    starts = ends - padded
    # 2. padding rows first (index n: skipped by the GEMM), then every assignment to its row
    for start in range(0, R, CHUNK):
        offs = start + tl.arange(0, CHUNK)
        tl.store(sorted_ptr + offs, tl.zeros([CHUNK], dtype=tl.int32) + n, mask=offs < R)
    tl.debug_barrier()
    before = tl.zeros([E_POW2], dtype=tl.int32)  # assignments of each expert in earlier chunks
    rows = tl.arange(0, CHUNK)
    for start in range(0, n, CHUNK):
        offs = start + rows
        e = tl.load(ids_ptr + offs, mask=offs < n, other=-1).to(tl.int32)
        onehot = (e[:, None] == experts[None, :]).to(tl.int32)  # [CHUNK, E]
        same_earlier = (e[:, None] == e[None, :]) & (rows[None, :] < rows[:, None])
        rank = tl.sum(same_earlier.to(tl.int32), axis=1) + tl.sum(onehot * (starts + before)[None, :], axis=1)
        tl.store(sorted_ptr + rank, offs.to(tl.int32), mask=offs < n)
        before += tl.sum(onehot, axis=0)
    # 3. expert of each block (-1 past the last expert's run)
    for start in range(0, R // BLOCK, CHUNK):
        b = start + tl.arange(0, CHUNK)
        first_row = b * BLOCK
        which = tl.sum((ends[None, :] <= first_row[:, None]).to(tl.int32) * (experts[None, :] < E).to(tl.int32),
                       axis=1)
        tl.store(block_expert_ptr + b, tl.where(which < E, which, -1), mask=b < R // BLOCK)
    tl.store(used_ptr, tl.max(tl.where(experts < E, ends, 0), axis=0))


# One program sorts up to this many assignments quickly (decode); prefill's tens of thousands go
# through the reference's device sort (a dozen launches, no host read).
ALIGN_MAX_ONE_PROGRAM = 4096


def moe_align(ids: torch.Tensor, num_experts: int, block: int):
    """Same results as kernels.reference.moe_align.moe_align, in one launch."""
    n = ids.numel()
    if n > ALIGN_MAX_ONE_PROGRAM:
        from ..reference.moe_align import moe_align as reference_align

        return reference_align(ids, num_experts, block)
    R = padded_rows(n, num_experts, block)
    flat = ids.reshape(-1).contiguous()
    sorted_ids = torch.empty(R, dtype=torch.int32, device=ids.device)
    block_expert = torch.empty(R // block, dtype=torch.int32, device=ids.device)
    used = torch.empty(1, dtype=torch.int32, device=ids.device)
    e_pow2 = next_pow2(num_experts, 16)
    chunk = 64 if e_pow2 <= 128 else 32
    _align_kernel[(1,)](flat, sorted_ids, block_expert, used, n, R, E=num_experts, E_POW2=e_pow2, BLOCK=block,
                        CHUNK=chunk, num_warps=num_warps(ids.device.type, 4))
    return sorted_ids, block_expert, used


@triton.jit
def block_tile(x_ptr, sorted_ptr, pid_m, pid_n, N, num_assignments, rows_per_token, s_xm,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """A grouped GEMM program's rows and columns: (assignment per row, which rows are real, the rows'
    input pointers, the columns, which columns are in range)."""
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    a = tl.load(sorted_ptr + rows)
    valid = a < num_assignments
    token = (a // rows_per_token).to(tl.int64)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    return a, valid, x_ptr + token[:, None] * s_xm, cols, cols < N


@triton.jit(do_not_specialize=["num_assignments"])
def _grouped_gemm_kernel(x_ptr, w_ptr, out_ptr, sorted_ptr, block_expert_ptr, weights_ptr, bias_ptr,
                         N, K, num_assignments, rows_per_token,
                         s_xm, s_xk, s_we, s_wn, s_wk, s_om, s_on, s_be, s_bn,
                         ACT: tl.constexpr, HAS_WEIGHTS: tl.constexpr, HAS_BIAS: tl.constexpr,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    expert = tl.load(block_expert_ptr + pid_m)
    if expert < 0:
        return
    a, valid, x_rows, cols, col_ok = block_tile(x_ptr, sorted_ptr, pid_m, pid_n, N, num_assignments, rows_per_token,
                                                s_xm, BLOCK_M, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    w_cols = w_ptr + expert.to(tl.int64) * s_we + cols[None, :] * s_wn
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + ks
        k_ok = k < K
        xt = tl.load(x_rows + k[None, :] * s_xk, mask=valid[:, None] & k_ok[None, :], other=0.0)
        wt = tl.load(w_cols + k[:, None] * s_wk, mask=k_ok[:, None] & col_ok[None, :], other=0.0)
        acc = tl.dot(xt, wt, acc)
    if HAS_BIAS:  # the expert's bias, before the activation and the routing weight
        acc += tl.load(bias_ptr + expert.to(tl.int64) * s_be + cols * s_bn, mask=col_ok, other=0.0).to(tl.float32)[None, :]
    acc = activate(acc, ACT)
    if HAS_WEIGHTS:
        rw = tl.load(weights_ptr + a, mask=valid, other=0.0).to(tl.float32)
        acc = acc * rw[:, None]
    dest = out_ptr + a.to(tl.int64)[:, None] * s_om + cols[None, :] * s_on
    tl.store(dest, acc.to(out_ptr.dtype.element_ty), mask=valid[:, None] & col_ok[None, :])


# (BLOCK_N, BLOCK_K, warps, stages) by rows: few rows (decode) want narrow column tiles, so that
# enough programs stream the weights; `TILE_OVERRIDE` lets bench/nano_full.py sweep them.
TILES = ((64, (32, 128, 2, 4)), (4096, (64, 128, 4, 3)), (1 << 30, (128, 64, 8, 3)))
TILE_OVERRIDE: dict = {}


def tile_for(num_assignments: int, N: int, K: int) -> tuple[int, int, int, int]:
    if "all" in TILE_OVERRIDE:
        return TILE_OVERRIDE["all"]
    for limit, tile in TILES:
        if num_assignments <= limit:
            bn, bk, w, st = tile
            return (bn if N >= bn else 32), (bk if K >= bk else 32), w, st
    return 64, 64, 4, 3


def moe_grouped_gemm(x, w, sorted_ids, block_expert, block: int, num_assignments: int, rows_per_token: int,
                     act: str | None = None, weights: torch.Tensor | None = None, out: torch.Tensor | None = None,
                     bias: torch.Tensor | None = None):
    """Same results as kernels.reference.moe_grouped_gemm (padding rows never written); `bias` [E, N]
    is added to each row's product before the activation."""
    if act not in _ACT:
        raise ValueError(f"fused MoE: activation {act!r} is not fused; use one of {sorted(k for k in _ACT if k)}")
    E, N, K = w.shape
    if out is None:
        out = torch.empty(num_assignments, N, dtype=x.dtype, device=x.device)
    if block == LARGE_BLOCK_M and "all" not in TILE_OVERRIDE and N >= LARGE_TILE[0] and K >= LARGE_TILE[1]:
        block_n, block_k, warps, stages = LARGE_TILE
    else:
        block_n, block_k, warps, stages = tile_for(num_assignments, N, K)
    grid = (block_expert.numel(), triton.cdiv(N, block_n))
    wts = weights.reshape(-1) if weights is not None else x
    b = bias if bias is not None else x
    _grouped_gemm_kernel[grid](x, w, out, sorted_ids, block_expert, wts, b, N, K, num_assignments, rows_per_token,
                               x.stride(0), x.stride(1), w.stride(0), w.stride(1), w.stride(2),
                               out.stride(0), out.stride(1), b.stride(0), b.stride(1) if b.dim() > 1 else 0,
                               ACT=_ACT[act], HAS_WEIGHTS=weights is not None, HAS_BIAS=bias is not None,
                               BLOCK_M=block, BLOCK_N=block_n, BLOCK_K=block_k,
                               num_warps=num_warps(x.device.type, warps), num_stages=stages)
    return out


def block_m_for(num_assignments: int, num_experts: int) -> int:
    """Rows per block: 16 when few rows reach each expert (decode), larger for prefill."""
    if "block_m" in TILE_OVERRIDE:
        return TILE_OVERRIDE["block_m"]
    per_expert = num_assignments / max(1, num_experts)
    return 16 if per_expert <= 16 else (32 if per_expert <= 64 else LARGE_BLOCK_M)


# Rows per block when many rows reach each expert (prefill), and that block's tile: on the H200 at
# 8192 tokens 128 x (256, 64, 8 warps, 4 stages) gave 442 TFLOP/s against 337 for 64 x (128, 64, 8, 3).
LARGE_BLOCK_M = 128
LARGE_TILE = (256, 64, 8, 4)


_GATED_SILU = ("silu", "swish")  # act(x @ gate^T) * (x @ up^T): fused_moe_gated's "silu"


def _swiglu_unsummed(x, weights, ids, up, down, gate):
    """[T, k, H] of SwiGLU experts through the fused gated MoE (before, the reference: a loop over the
    experts with their counts read back to the host, or every expert on every token in a graph)."""
    from .fused_moe_gated import moe_gated_experts_unsummed  # (that module imports this one)

    return moe_gated_experts_unsummed(x, weights, ids, gate, up, down, "silu")


def moe_experts(x, weights, ids, up, down, gate=None, act="relu2", strategy=None):
    """Same arguments and result as kernels.reference.moe_experts (`strategy` is ignored: this
    form reads only the routed experts at every size)."""
    if gate is not None and act in _GATED_SILU and x.shape[0]:
        return _swiglu_unsummed(x, weights, ids, up, down, gate).sum(1)
    if gate is not None or act not in _ACT or x.shape[0] == 0:
        return _reference_moe(x, weights, ids, up, down, gate, act, strategy)
    return moe_experts_unsummed(x, weights, ids, up, down, gate, act).sum(1)


def moe_experts_unsummed(x, weights, ids, up, down, gate=None, act="relu2", strategy=None):
    """[T, k, H]: each assignment's weighted expert output; the sum over k is left to the caller
    (the model's next residual add + norm does it in its own kernel)."""
    if gate is not None and act in _GATED_SILU and x.shape[0]:
        return _swiglu_unsummed(x, weights, ids, up, down, gate)
    if gate is not None or act not in _ACT or x.shape[0] == 0:
        return _reference_moe(x, weights, ids, up, down, gate, act, strategy)[:, None, :]
    T, k = ids.shape
    E = up.shape[0]
    n = T * k
    block = block_m_for(n, E)
    sorted_ids, block_expert, _used = moe_align(ids, E, block)
    h = moe_grouped_gemm(x, up, sorted_ids, block_expert, block, n, k, act=act)
    y = moe_grouped_gemm(h, down, sorted_ids, block_expert, block, n, 1, act=None, weights=weights)
    return y.view(T, k, -1)


_DENSE_ROWS: dict = {}
DENSE_MLP_MAX_TOKENS = 512  # above this (prefill), cuBLAS through the reference is as good


def _dense_rows(T: int, block: int, device):
    """Sorted ids and block experts of T tokens all going to one expert (cached per shape: no
    launches in a step, and safe in graph capture once warmed)."""
    key = (T, block, str(device))
    if key not in _DENSE_ROWS:
        R = -(-T // block) * block
        rows = torch.arange(R, device=device, dtype=torch.int32).clamp_(max=T)
        _DENSE_ROWS[key] = (rows, torch.zeros(R // block, dtype=torch.int32, device=device))
    return _DENSE_ROWS[key]


def mlp(x, up, down, gate=None, act="relu2", up_bias=None, down_bias=None, gate_bias=None):
    """Same arguments and result as kernels.reference.mlp; a relu2 (or relu, silu) MLP without gate
    or biases on a decode-sized batch runs as two GEMMs with the activation fused."""
    from ..reference import mlp as _reference_mlp

    T = x.shape[0]
    if (gate is not None or up_bias is not None or down_bias is not None or act not in _ACT or T == 0
            or T > DENSE_MLP_MAX_TOKENS or x.dim() != 2):
        return _reference_mlp(x, up, down, gate, act, up_bias, down_bias, gate_bias)
    block = 16 if T <= 16 else (32 if T <= 64 else 64)
    rows, experts = _dense_rows(T, block, x.device)
    h = moe_grouped_gemm(x, up[None], rows, experts, block, T, 1, act=act)
    return moe_grouped_gemm(h, down[None], rows, experts, block, T, 1)


@triton.jit
def _route_kernel(logits_ptr, bias_ptr, weights_ptr, ids_ptr, E, s_l, scaling,
                  TOP_K: tl.constexpr, K_POW2: tl.constexpr, E_POW2: tl.constexpr, HAS_BIAS: tl.constexpr, NORM: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    e = tl.arange(0, E_POW2)
    ok = e < E
    logit = tl.load(logits_ptr + t * s_l + e, mask=ok, other=0.0).to(tl.float32)
    score = tl.sigmoid(logit)
    choice = score
    if HAS_BIAS:
        choice = choice + tl.load(bias_ptr + e, mask=ok, other=0.0).to(tl.float32)
    choice = tl.where(ok, choice, float("-inf"))
    lanes = tl.arange(0, K_POW2)
    picked = tl.zeros([K_POW2], dtype=tl.float32)
    for j in tl.static_range(TOP_K):
        best = tl.argmax(choice, axis=0)
        w = tl.sum(tl.where(e == best, score, 0.0), axis=0)
        picked = tl.where(lanes == j, w, picked)
        tl.store(ids_ptr + t * TOP_K + j, best.to(tl.int64))
        choice = tl.where(e == best, float("-inf"), choice)
    if NORM:
        picked = picked * (scaling / (tl.sum(picked, axis=0) + 1e-20))
    else:
        picked = picked * scaling
    tl.store(weights_ptr + t * TOP_K + lanes, picked, mask=lanes < TOP_K)


def route_sigmoid_grouped(router_logits, correction_bias, top_k, n_group=1, topk_group=1, norm_topk_prob=True,
                          routed_scaling_factor=1.0):
    """Same results as the reference router; one group only (more groups use the reference)."""
    T, E = router_logits.shape
    if n_group > 1 or T == 0 or top_k > 64:
        return _reference_route(router_logits, correction_bias, top_k, n_group, topk_group, norm_topk_prob,
                                routed_scaling_factor)
    logits = router_logits if router_logits.stride(1) == 1 else router_logits.contiguous()
    weights = torch.empty(T, top_k, dtype=torch.float32, device=logits.device)
    ids = torch.empty(T, top_k, dtype=torch.int64, device=logits.device)
    _route_kernel[(T,)](logits, correction_bias if correction_bias is not None else logits, weights, ids, E,
                        logits.stride(0), float(routed_scaling_factor), TOP_K=top_k, K_POW2=next_pow2(top_k), E_POW2=next_pow2(E, 16),
                        HAS_BIAS=correction_bias is not None, NORM=bool(norm_topk_prob),
                        num_warps=num_warps(logits.device.type, 1))
    return weights, ids


# Decode-sized MoE: one program per (assignment, column block), no sorting ------------------------
#
# At a handful of tokens the sorted form's blocks hold one real row of 16 and its align kernel is a
# launch of its own. Here each assignment (token, slot) multiplies its token's row by its expert's
# matrix directly (a GEMV: multiply and sum in float32, no tensor cores: the layer is bound by
# reading the weights). The shared expert rides along as S extra slots per token, its matrices cut
# in S slices of the experts' width (kernels/reference/moe_shared.py), so one up and one down launch
# do the whole layer. Reference: kernels/reference/moe_shared.py.

@triton.jit
def _moe_gemv_kernel(x_ptr, w_ptr, ws_ptr, out_ptr, ids_ptr, weights_ptr, N, K,
                     s_xm, s_xk, s_we, s_wn, s_wk, s_se, s_sn, s_sk, s_om, s_on,
                     TOP_K: tl.constexpr, SLOTS: tl.constexpr, X_PER_TOKEN: tl.constexpr, ACT: tl.constexpr,
                     HAS_WEIGHTS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    a = tl.program_id(0)  # assignment: token * SLOTS + slot
    token = a // SLOTS
    j = a % SLOTS
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < N
    if X_PER_TOKEN:
        x_row = x_ptr + token.to(tl.int64) * s_xm
    else:
        x_row = x_ptr + a.to(tl.int64) * s_xm
    if j < TOP_K:
        e = tl.load(ids_ptr + token * TOP_K + j).to(tl.int64)
        w_base = w_ptr + e * s_we
        sn = s_wn
        sk = s_wk
    else:
        w_base = ws_ptr + (j - TOP_K).to(tl.int64) * s_se
        sn = s_sn
        sk = s_sk
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + ks
        k_ok = k < K
        xv = tl.load(x_row + k * s_xk, mask=k_ok, other=0.0).to(tl.float32)
        wv = tl.load(w_base + cols[:, None] * sn + k[None, :] * sk, mask=col_ok[:, None] & k_ok[None, :], other=0.0)
        acc += tl.sum(wv.to(tl.float32) * xv[None, :], axis=1)
    acc = activate(acc, ACT)
    if HAS_WEIGHTS:
        if j < TOP_K:
            acc = acc * tl.load(weights_ptr + token * TOP_K + j).to(tl.float32)
    tl.store(out_ptr + a.to(tl.int64) * s_om + cols * s_on, acc.to(out_ptr.dtype.element_ty), mask=col_ok)


# Up to this many tokens the GEMV form runs (bench/nano_full.py --sweep compares it with the sorted
# form); (BLOCK_N, BLOCK_K, warps) of its launches.
# H200, real Nano shapes (bench/nano_full.py --sweep): (8, 256, 2) fastest at 1 token (75 us for the
# six experts and the shared one against 400 us sorted); the sorted form wins from 8 tokens on.
GEMV_MAX_TOKENS = 4
GEMV_TILE = (8, 256, 2)


def _moe_gemv(x, w, ws, ids, weights, slots, x_per_token, act):
    T, top_k = ids.shape
    N, K = w.shape[1], w.shape[2]
    out = torch.empty(T * slots, N, dtype=x.dtype, device=x.device)
    block_n, block_k, warps = GEMV_TILE
    _moe_gemv_kernel[(T * slots, triton.cdiv(N, block_n))](
        x, w, ws, out, ids, weights if weights is not None else x, N, K, x.stride(0), x.stride(1),
        w.stride(0), w.stride(1), w.stride(2), ws.stride(0), ws.stride(1), ws.stride(2), out.stride(0), out.stride(1),
        TOP_K=top_k, SLOTS=slots, X_PER_TOKEN=x_per_token, ACT=_ACT[act], HAS_WEIGHTS=weights is not None,
        BLOCK_N=block_n, BLOCK_K=block_k, num_warps=num_warps(x.device.type, warps))
    return out


def moe_experts_shared_unsummed(x, weights, ids, up, down, shared_up, shared_down, act="relu2"):
    """Same arguments and results as kernels.reference.moe_shared.moe_experts_shared_unsummed:
    (shared [T, H] or parts [T, S, H], routed [T, k, H]). Up to GEMV_MAX_TOKENS tokens: two launches
    for the shared and routed experts together; above, the shared expert through `mlp` and the routed
    ones through the sorted grouped GEMMs."""
    from ..reference.moe_shared import shared_slices

    T, k = ids.shape
    sliced = shared_slices(shared_up, shared_down, up.shape[1]) if act in _ACT else None
    if T == 0 or T > GEMV_MAX_TOKENS or sliced is None or up.shape[1:] != down.shape[:0:-1]:
        return mlp(x, shared_up, shared_down, None, act), moe_experts_unsummed(x, weights, ids, up, down, None, act)
    su, sd = sliced
    S = su.shape[0]
    h = _moe_gemv(x, up, su, ids, None, k + S, True, act)
    y = _moe_gemv(h, down, sd, ids, weights, k + S, False, None).view(T, k + S, -1)
    return y[:, k:], y[:, :k]


@triton.jit
def _router_logits_kernel(x_ptr, w_ptr, out_ptr, E, H, s_x, s_we, s_o, BLOCK_K: tl.constexpr):
    # One program per (token, expert): the whole row in one load (H <= BLOCK_K), so each program is
    # one memory round trip and T * E programs keep the device busy.
    t = tl.program_id(0).to(tl.int64)
    e = tl.program_id(1).to(tl.int64)
    k = tl.arange(0, BLOCK_K)
    ok = k < H
    xv = tl.load(x_ptr + t * s_x + k, mask=ok, other=0.0).to(tl.float32)
    wv = tl.load(w_ptr + e * s_we + k, mask=ok, other=0.0).to(tl.float32)
    tl.store(out_ptr + t * s_o + e, tl.sum(xv * wv, axis=0))


ROUTER_MAX_TOKENS = 64  # above, the float32 copy of the rows and cuBLAS are as good


def router_logits(hidden, weight):
    """Same as kernels.reference.router_logits ([T, E] float32): at decode sizes one kernel reads
    the rows in their own dtype (no float32 copy of them first)."""
    T, H = hidden.shape
    if T == 0 or T > ROUTER_MAX_TOKENS or H > 8192 or hidden.stride(1) != 1 or weight.stride(1) != 1:
        return _reference_router_logits(hidden, weight)
    E = weight.shape[0]
    out = torch.empty(T, E, dtype=torch.float32, device=hidden.device)
    _router_logits_kernel[(T, E)](hidden, weight, out, E, H, hidden.stride(0), weight.stride(0), out.stride(0),
                                  BLOCK_K=next_pow2(H), num_warps=num_warps(hidden.device.type, 4))
    return out
