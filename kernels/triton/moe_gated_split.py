"""The gated MoE at 1 to a few tokens, spread over the whole device: two launches, no sort, each
touched expert read once, in many small programs.

At one token only k experts are touched (gpt-oss: 4 of 32, Kimi-Linear: 8 of 256). The expert-by-expert
form (moe_gated_grouped.py) gives each (expert, 64 columns) one program that walks all of K: for gpt-oss
180 working programs for 132 SMs (1.4 waves), among 1260 launched for experts no token chose. Here a
program is a (slot, column block[, K split]): slot j = the j-th of the T * k router ids, working only if
ids[j] is that expert's first slot (it then runs all of the expert's rows, at most one per token), so no
program is launched for an untouched expert and each touched one is read once.
- `_split_gated_up_kernel`, grid (T * k, I / BLOCK_N): h = act(x @ gate[e]^T + gate_bias, x @ up[e]^T +
  up_bias) for BLOCK_N gate/up column pairs over all of K (the activation needs whole sums);
- `_split_down_kernel`, grid (T * k, H / BLOCK_N, SPLIT_K): each program one K range of
  (h @ down[e]^T); partial sums go to a float32 workspace, and the program that finishes a column block
  last (a counter per block, zeroed by the up launch) adds them in split order, then the bias and the
  routing weight, and stores the output: the reduction stays inside the launch, deterministic.
Products on tensor cores (a 16-row block holds an expert's <= 16 rows), so Triton streams each weight tile
through cp.async into shared memory, NUM_STAGES deep (16-byte copies: core/bench/compiled_loads.py).

Why this should read > 3 TB/s on an H200 (132 SMs, 4.8 TB/s), gpt-oss at 1 token (4 experts, 199 MB):
- up: 4 x 2880 / 16 = 720 programs, each 2880 x 32 bf16 columns = 184 KB; a stage holds an 8 KB weight tile
  (+4 KB of x), 4 stages = 48 KB of shared memory, so 4 programs fit on an SM: 3 tiles ahead each, 96 KB in
  flight per SM, where keeping 4.8 TB/s through ~0.8 us of loaded DRAM latency needs 4.8e12 * 0.8e-6 / 132
  = 29 KB. 720 equal programs over 528 slots: the last ones start as the first end, a tail under a tenth.
- down: 4 x 2880 / 64 column blocks x SPLIT_K 4 = 720 programs of 720 x 64 = 92 KB, 16 KB tiles, two
  programs per SM: 96 KB in flight per SM again; the partials are 4 x 4 x 2880 x 4 B = 184 KB, 0.1 % of it.
- so both launches should stream near the copy bandwidth (~4.3 TB/s): 133 MB + 66 MB in ~46 us, plus a
  few us of launch and tail: 3.5 to 4 TB/s, where the grouped form measured 1.3 (eager) and the GEMV 0.6.
Reference: kernels/reference/moe_gated_experts.py (moe_gated_experts_unsummed).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .gate_up_layout import interleaved
from .launch import compute_units, next_pow2, num_warps
from .moe_gated_grouped import gated_up_rows, routed_to, rows_of

# Up to this many tokens (an expert's rows fit one 16-row block: each token picks an expert at most once).
SPLIT_MAX_TOKENS = 16
BLOCK_M = 16
# (BLOCK_N, BLOCK_K, warps, stages) of each launch; up: BLOCK_N gate/up column pairs. The down launch
# splits K until about PROGRAMS_PER_SM programs per SM run (counting every slot as a touched expert).
# Up: 32 pairs, the fastest of bench/decode_fusions_gpu.py's up tiles at every token count on the H200
# (gpt-oss's experts, CUDA graphs: 57 / 165 / 250 us at 1 / 4 / 8 tokens against 65 / 202 / 330 for 16
# pairs, 2026-12-04); the down tiles were within noise of each other.
TILE = {"up": (32, 128, 4, 4), "down": (64, 128, 4, 4)}
PROGRAMS_PER_SM = 5
TILE_OVERRIDE: dict = {}  # {"up" / "down": a tile, "split_k": an int}: bench/decode_fusions_gpu.py


@triton.jit
def first_slot_rows(ids_ptr, n, j, N_POW2: tl.constexpr, BLOCK_M: tl.constexpr):
    """Slot j's expert e, whether j is e's first slot among the n, e's slots (a [BLOCK_M]) and which are real."""
    e = tl.load(ids_ptr + j).to(tl.int32)
    hit, rank, count = routed_to(ids_ptr, n, e, N_POW2)
    first = tl.min(tl.where(hit, tl.arange(0, N_POW2), N_POW2), axis=0)
    a, valid = rows_of(hit, rank, count, 0, N_POW2, BLOCK_M)
    return e.to(tl.int64), first == j, a, valid


@triton.jit(do_not_specialize=["n"])
def _split_gated_up_kernel(x_ptr, g_ptr, u_ptr, gb_ptr, ub_ptr, out_ptr, ids_ptr, count_ptr, n, N, K,
                           rows_per_token, alpha, limit, s_xm, s_xk, s_ge, s_gn, s_gk, s_ue, s_un, s_uk, s_gbe,
                           s_gbn, s_ube, s_ubn, s_om, s_on, ACT: tl.constexpr, HAS_BIAS: tl.constexpr,
                           HAS_LIMIT: tl.constexpr, INTERLEAVED: tl.constexpr, N_POW2: tl.constexpr,
                           COUNTERS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                           BLOCK_K: tl.constexpr):
    j, pid_n = tl.program_id(0), tl.program_id(1)
    if pid_n == 0:  # the down launch's counters of this slot, zeroed before it runs
        c = tl.arange(0, COUNTERS)
        tl.store(count_ptr + j * COUNTERS + c, tl.zeros([COUNTERS], dtype=tl.int32))
    e, first, a, valid = first_slot_rows(ids_ptr, n, j, N_POW2, BLOCK_M)
    if first:
        gated_up_rows(x_ptr, g_ptr, u_ptr, gb_ptr, ub_ptr, out_ptr, a, valid, e, pid_n, N, K, rows_per_token, alpha,
                      limit, s_xm, s_xk, s_ge, s_gn, s_gk, s_ue, s_un, s_uk, s_gbe, s_gbn, s_ube, s_ubn, s_om, s_on,
                      ACT, HAS_BIAS, HAS_LIMIT, INTERLEAVED, BLOCK_M, BLOCK_N, BLOCK_K)


@triton.jit(do_not_specialize=["n"])
def _split_down_kernel(h_ptr, w_ptr, b_ptr, out_ptr, part_ptr, count_ptr, ids_ptr, weights_ptr, n, N, K, k_chunk,
                       s_hm, s_hk, s_we, s_wn, s_wk, s_be, s_bn, s_om, s_on, HAS_BIAS: tl.constexpr,
                       N_POW2: tl.constexpr, COUNTERS: tl.constexpr, SPLIT_K: tl.constexpr,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    j, pid_n, pid_k = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    e, first, a, valid = first_slot_rows(ids_ptr, n, j, N_POW2, BLOCK_M)
    if first:
        cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        col_ok = cols < N
        h_rows = h_ptr + a.to(tl.int64)[:, None] * s_hm
        w_cols = w_ptr + e * s_we + cols[None, :] * s_wn
        ks = tl.arange(0, BLOCK_K)
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        k_end = tl.minimum(K, (pid_k + 1) * k_chunk)
        for k0 in range(pid_k * k_chunk, k_end, BLOCK_K):
            k = k0 + ks
            k_ok = k < k_end
            ht = tl.load(h_rows + k[None, :] * s_hk, mask=valid[:, None] & k_ok[None, :], other=0.0)
            acc = tl.dot(ht, tl.load(w_cols + k[:, None] * s_wk, mask=k_ok[:, None] & col_ok[None, :], other=0.0),
                         acc)
        ok = valid[:, None] & col_ok[None, :]
        rows_cols = a.to(tl.int64)[:, None] * N + cols[None, :]  # the workspace [SPLIT_K, n, N]
        done = True
        if SPLIT_K > 1:
            tl.store(part_ptr + pid_k * n * N + rows_cols, acc, mask=ok)
            tl.debug_barrier()  # every thread's partial written before the release below
            done = tl.atomic_add(count_ptr + j * COUNTERS + pid_n, 1, sem="acq_rel") == SPLIT_K - 1
        if done:  # the last of the column block's K splits: the sum in split order, bias, routing weight
            if SPLIT_K > 1:
                acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
                for s in range(SPLIT_K):  # through L2 (.cg): the other splits wrote there
                    acc += tl.load(part_ptr + s * n * N + rows_cols, mask=ok, other=0.0, cache_modifier=".cg")
            if HAS_BIAS:
                acc += tl.load(b_ptr + e * s_be + cols * s_bn, mask=col_ok, other=0.0).to(tl.float32)[None, :]
            acc = acc * tl.load(weights_ptr + a, mask=valid, other=0.0).to(tl.float32)[:, None]
            dest = out_ptr + a.to(tl.int64)[:, None] * s_om + cols[None, :] * s_on
            tl.store(dest, acc.to(out_ptr.dtype.element_ty), mask=ok)


def split_k_for(slots: int, column_blocks: int, K: int, block_k: int, device) -> int:
    """K splits of the down launch: enough for PROGRAMS_PER_SM programs per SM, each at least two K tiles."""
    if "split_k" in TILE_OVERRIDE:
        return TILE_OVERRIDE["split_k"]
    want = -(-PROGRAMS_PER_SM * compute_units(device) // max(1, slots * column_blocks))
    return max(1, min(want, K // (2 * block_k)))


def moe_gated_split_unsummed(x, weights, ids, gate, up, down, act_id: int, gate_bias, up_bias, down_bias, alpha,
                             limit) -> torch.Tensor:
    """[T, k, H] as fused_moe_gated.moe_gated_experts_unsummed, in two launches (act_id: its _GATED code)."""
    T, k = ids.shape
    E, N, K = gate.shape
    H = down.shape[1]
    n = T * k
    flat = ids.reshape(-1).contiguous()
    wts = weights.reshape(-1).contiguous()
    n_pow2 = next_pow2(n, 16)
    up_n, up_k, up_warps, up_stages = TILE_OVERRIDE.get("up", TILE["up"])
    dn_n, dn_k, dn_warps, dn_stages = TILE_OVERRIDE.get("down", TILE["down"])
    column_blocks = triton.cdiv(H, dn_n)
    split_k = split_k_for(n, column_blocks, N, dn_k, x.device)
    k_chunk = triton.cdiv(triton.cdiv(N, split_k), dn_k) * dn_k
    counters = next_pow2(column_blocks)
    count = torch.empty(n, counters, dtype=torch.int32, device=x.device)
    h = torch.empty(n, N, dtype=x.dtype, device=x.device)
    has_bias = gate_bias is not None or up_bias is not None
    gb = gate_bias if gate_bias is not None else torch.zeros(E, N, dtype=x.dtype, device=x.device) if has_bias else x
    ub = up_bias if up_bias is not None else torch.zeros(E, N, dtype=x.dtype, device=x.device) if has_bias else x
    _split_gated_up_kernel[(n, triton.cdiv(N, up_n))](
        x, gate, up, gb, ub, h, flat, count, n, N, K, k, float(alpha), float(limit or 0.0), x.stride(0), x.stride(1),
        *gate.stride(), *up.stride(), gb.stride(0), gb.stride(-1), ub.stride(0), ub.stride(-1), h.stride(0),
        h.stride(1), ACT=act_id, HAS_BIAS=has_bias, HAS_LIMIT=limit is not None, INTERLEAVED=interleaved(gate, up),
        N_POW2=n_pow2, COUNTERS=counters, BLOCK_M=BLOCK_M, BLOCK_N=up_n, BLOCK_K=up_k,
        num_warps=num_warps(x.device.type, up_warps), num_stages=up_stages)
    out = torch.empty(n, H, dtype=x.dtype, device=x.device)
    part = torch.empty(split_k, n, H, dtype=torch.float32, device=x.device) if split_k > 1 else out
    db = down_bias if down_bias is not None else x
    _split_down_kernel[(n, column_blocks, split_k)](
        h, down, db, out, part, count, flat, wts, n, H, N, k_chunk, h.stride(0), h.stride(1),
        *down.stride(), db.stride(0), db.stride(-1), out.stride(0), out.stride(1), HAS_BIAS=down_bias is not None,
        N_POW2=n_pow2, COUNTERS=counters, SPLIT_K=split_k, BLOCK_M=BLOCK_M, BLOCK_N=dn_n, BLOCK_K=dn_k,
        num_warps=num_warps(x.device.type, dn_warps), num_stages=dn_stages)
    return out.view(T, k, H)
