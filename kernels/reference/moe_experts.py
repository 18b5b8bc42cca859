"""Routed expert compute: each token through its chosen experts, summed with the routing weights.

Three ways to do the same sum, chosen from the shapes alone (never from the routing itself, which
would make the host wait for the device):
- "sorted": assignments sorted by expert, each expert run once on its contiguous block. Needs the
  per-expert counts on the host: free on the CPU, a device sync once per MoE layer on a GPU, so
  GPUs use it only for big batches (prefill), where the compute dwarfs the wait.
- "gather": each (token, expert) assignment multiplies its own gathered copy of the expert's
  weights (one batched matmul). For few assignments next to many experts (small decode batches).
- "dense": every expert on every token, the chosen results picked out. For GPU decode batches,
  where reading every expert's weights once costs less than a sync and a launch per expert.
All three combine the per-assignment outputs the same way, in the same order.
"""

from __future__ import annotations

import torch

from .mlp import activation, mlp

# Device types where reading the routing back to the host costs nothing (there is no queue of
# device work to drain). Tests empty it to run the GPU choices on the CPU.
HOST_READS_FREE = {"cpu"}
# Up to this many tokens a GPU runs every expert on every token ("dense"): the layer stays bound
# by reading the expert weights, which the sorted form reads too (all experts are hit at this size).
DENSE_MAX_TOKENS = 64
# "gather" copies one expert's weights per assignment; worth it while that is well under one read
# of all experts, and while the copies stay small next to the memory the pools leave free.
GATHER_MAX_SHARE = 1 / 3
GATHER_MAX_BYTES = 512 * 2**20


def moe_strategy(num_tokens: int, top_k: int, num_experts: int, device_type: str, expert_bytes: int = 0,
                 capturing: bool = False) -> str:
    """"sorted", "gather" or "dense" for a batch of this shape on this kind of device
    (expert_bytes: one expert's weights, which "gather" copies once per assignment). `capturing`:
    a device graph is being captured, where the sorted form's host read cannot run at any size."""
    if device_type in HOST_READS_FREE:
        return "sorted"
    assignments = num_tokens * top_k
    if assignments <= GATHER_MAX_SHARE * num_experts and assignments * expert_bytes <= GATHER_MAX_BYTES:
        return "gather"
    if num_tokens <= DENSE_MAX_TOKENS or capturing:
        return "dense"
    return "sorted"


def moe_experts(
    x: torch.Tensor,
    weights: torch.Tensor,
    ids: torch.Tensor,
    up: torch.Tensor,
    down: torch.Tensor,
    gate: torch.Tensor | None = None,
    act: str = "relu2",
    strategy: str | None = None,
) -> torch.Tensor:
    """x [T, H]; weights/ids [T, k]; up [E, I, H], down [E, H, I], gate [E, I, H] or None (relu2
    experts have none; SwiGLU experts do). Returns [T, H] in x's dtype. `strategy` forces one of
    the forms above (tests); left out, `moe_strategy` picks it.
    """
    T, k = ids.shape
    return (per_assignment(x, ids, up, down, gate, act, strategy).view(T, k, -1).float()
            * weights[..., None].float()).sum(1).to(x.dtype)


def per_assignment(x, ids, up, down, gate=None, act="relu2", strategy=None) -> torch.Tensor:
    """[T * k, H]: each (token, slot) assignment through its expert, unweighted, by `strategy` (or
    the one `moe_strategy` picks for the shapes)."""
    T, k = ids.shape
    if strategy is None:
        expert_bytes = sum(w[0].numel() * w.element_size() for w in (up, down, gate) if w is not None)
        capturing = x.device.type == "cuda" and torch.cuda.is_current_stream_capturing()
        strategy = moe_strategy(T, k, up.shape[0], x.device.type, expert_bytes, capturing)
    if strategy == "sorted":
        return _sorted(x, ids, up, down, gate, act)
    if strategy == "gather":
        return _gathered(x, ids, up, down, gate, act)
    if strategy == "dense":
        return _dense(x, ids, up, down, gate, act)
    raise ValueError(f"unknown MoE strategy {strategy!r}; use sorted, gather or dense")


def moe_experts_unsummed(x, weights, ids, up, down, gate=None, act="relu2", strategy=None) -> torch.Tensor:
    """[T, k, H] in x's dtype: each assignment's weighted expert output, the sum over k left to the
    caller (the reference of the fused MoE's unsummed form, which dispatch hands out beside it)."""
    T, k = ids.shape
    return (per_assignment(x, ids, up, down, gate, act, strategy).view(T, k, -1).float()
            * weights[..., None].float()).to(x.dtype)


def _sorted(x, ids, up, down, gate, act) -> torch.Tensor:
    """[T * k, H]: the T*k (token, expert) assignments sorted by expert, so each expert runs once on
    one contiguous block of its tokens; results go back to their (token, slot) places, no scatter-add."""
    T, k = ids.shape
    if T * k == 0:
        return x.new_empty(0, down.shape[1])
    flat = ids.reshape(-1)
    order = flat.argsort(stable=True)
    counts = torch.bincount(flat, minlength=up.shape[0]).tolist()
    blocks = x.index_select(0, order // k).split(counts)  # one block of rows per expert, in expert order
    out_sorted = torch.cat([mlp(rows, up[e], down[e], None if gate is None else gate[e], act)
                            for e, rows in enumerate(blocks) if counts[e]])
    return torch.empty_like(out_sorted).index_copy_(0, order, out_sorted)


def _expert_mlp(x, up, down, gate, act) -> torch.Tensor:
    """Batched `mlp`: x [N, M, H], up/gate [N, I, H], down [N, H, I] -> [N, M, H]."""
    h = torch.matmul(x, up.transpose(1, 2))
    h = activation(act, torch.matmul(x, gate.transpose(1, 2))) * h if gate is not None else activation(act, h)
    return torch.matmul(h, down.transpose(1, 2))


def _gathered(x, ids, up, down, gate, act) -> torch.Tensor:
    """[T * k, H]: each assignment through its own copy of its expert's weights."""
    T, k = ids.shape
    flat = ids.reshape(-1)
    rows = x[:, None, :].expand(T, k, x.shape[1]).reshape(T * k, 1, x.shape[1])  # assignment order (token, slot)
    return _expert_mlp(rows, up[flat], down[flat], None if gate is None else gate[flat], act)[:, 0, :]


def _dense(x, ids, up, down, gate, act) -> torch.Tensor:
    """[T * k, H]: every expert on every token, then each assignment's result picked out."""
    T, k = ids.shape
    every = _expert_mlp(x.expand(up.shape[0], T, x.shape[1]), up, down, gate, act)  # [E, T, H]
    tokens = torch.arange(T, device=x.device)[:, None].expand(T, k).reshape(-1)  # no repeat_interleave: it may sync
    return every[ids.reshape(-1), tokens]
