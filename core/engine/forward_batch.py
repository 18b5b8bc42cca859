"""ForwardBatch: what the scheduler hands the model for one forward pass.

A batch is B requests, each bringing `query_lens[i]` new tokens (a prefill chunk or one decode
token), laid out back to back in `input_ids` (T = sum of query_lens tokens). Any mix of prefill and
decode requests is allowed. Request i's context after this step holds `context_lens[i]` tokens, the
new ones included, so its cached prefix is `context_lens[i] - query_lens[i]` tokens.

KV (attention layers): the pages of request i are `block_tables[i, :ceil(context_lens[i] / page_size)]`
and token t of the batch is written at flat slot `slot_mapping[t]` = page * page_size + offset.
Sliding-window layers with an SWA pool: the same, through `swa_block_tables` and
`swa_slot_mapping` into `swa_pool` (pages the window has left point at page 0: read, but masked).
State (Mamba2 layers): request i reads and writes slot `state_slots[i]`; `has_initial_state[i]` is
False for the first chunk of a prompt (start from zeros) and True once the slot holds state.

The model returns logits of the last new token of each request: `[B, vocab]`.

Host overhead matters on a GPU: every read of a device tensor back to the host, and every plain
host->device copy, waits for the device to drain. `build` therefore keeps the host copies of the
per-request values it started from (nothing is read back), sends all device metadata in ONE copy,
and `upload` lets a model send per-batch values of its own the same way, once per batch, not per layer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import torch


def upload(values: Sequence[Sequence[int]], device: torch.device, dtype: torch.dtype = torch.long) -> list[torch.Tensor]:
    """Several lists of numbers -> tensors of `dtype` (int64 unless told) on `device`, in one
    host->device copy (pinned and asynchronous on CUDA, so the host does not wait for the device).
    Returns contiguous views, each starting on a 16-byte boundary: Triton compiles a kernel once per
    alignment of its pointer arguments, and views at offsets that follow the list lengths were a
    fresh compile whenever a step's counts changed parity."""
    per = max(1, 16 // torch.empty((), dtype=dtype).element_size())
    flat: list = []
    offsets = []
    for v in values:
        offsets.append(len(flat))
        flat.extend(v)
        flat.extend([0] * (-len(flat) % per))
    host = torch.tensor(flat, dtype=dtype, device="cpu")  # (pinning needs a host tensor whatever the default device)
    if device.type == "cuda":
        host = host.pin_memory()  # the caching host allocator keeps it until the copy has run
        moved = host.to(device, non_blocking=True)
    elif device.type != "cpu":
        moved = host.to(device)
    else:
        moved = host
    return [moved[o:o + len(v)] for o, v in zip(offsets, values)]


@dataclass
class ForwardBatch:
    input_ids: torch.Tensor  # [T] int64
    positions: torch.Tensor  # [T] int64, position of each new token in its sequence
    query_lens: torch.Tensor  # [B] int32 (cpu): new tokens per request
    context_lens: torch.Tensor  # [B] int32 (cpu): tokens in context after this step, new ones included
    block_tables: torch.Tensor  # [B, max_pages] int32 (device); unused entries may hold anything
    slot_mapping: torch.Tensor  # [T] int64 (device): flat KV slot of each new token
    state_slots: torch.Tensor  # [B] int64 (device): state-pool slot of each request
    has_initial_state: torch.Tensor  # [B] bool (device): the slot already holds this request's state
    kv_pool: Any = None  # KVPool, or None for a model without attention layers
    state_pool: Any = None  # StatePool, or None for a model without state layers
    swa_pool: Any = None  # SWAPool of the sliding-window layers, or None (they use kv_pool)
    swa_block_tables: torch.Tensor | None = None  # [B, max_pages] int32 (device), as block_tables
    swa_slot_mapping: torch.Tensor | None = None  # [T] int64 (device)
    # Host copies the reference kernels loop over. `build` passes the lists it started from; left
    # out, they are read from the tensors (a device sync for state_slots and has_initial_state).
    query_lens_list: list[int] | None = field(default=None, repr=False)
    context_lens_list: list[int] | None = field(default=None, repr=False)
    state_slots_list: list[int] | None = field(default=None, repr=False)
    has_initial_state_list: list[bool] | None = field(default=None, repr=False)
    # [B] int64 on the tokens' device: each request's last new token (built here when left out).
    last_token_indices_on_device: torch.Tensor | None = field(default=None, repr=False)
    # context_lens on the tokens' device (built here when left out).
    context_lens_device: torch.Tensor | None = field(default=None, repr=False)
    # Values derived once per batch and shared by all layers (e.g. which requests step their state).
    memo: dict = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        if self.query_lens_list is None:
            self.query_lens_list = [int(n) for n in self.query_lens.tolist()]
        if self.context_lens_list is None:
            self.context_lens_list = [int(n) for n in self.context_lens.tolist()]
        if self.state_slots_list is None:
            self.state_slots_list = [int(n) for n in self.state_slots.tolist()]
        if self.has_initial_state_list is None:
            self.has_initial_state_list = [bool(b) for b in self.has_initial_state.tolist()]
        if sum(self.query_lens_list) != self.input_ids.numel():
            raise ValueError(
                f"ForwardBatch: query_lens sum to {sum(self.query_lens_list)} but input_ids has "
                f"{self.input_ids.numel()} tokens"
            )
        for i, (q, c) in enumerate(zip(self.query_lens_list, self.context_lens_list)):
            if q < 1 or c < q:
                raise ValueError(f"ForwardBatch: request {i} has query_len {q} and context_len {c}; need 1 <= q <= c")
        self._decode_only = all(q == 1 for q in self.query_lens_list)
        self._pure_decode = self._decode_only and all(self.has_initial_state_list)

    @property
    def is_decode_only(self) -> bool:
        """Every request brings exactly one token (the batched decode kernels apply)."""
        return self._decode_only

    @property
    def is_pure_decode(self) -> bool:
        """Every request brings one token and continues a state it holds (no one-token prompt): the
        batch's Mamba state only steps. A flag, so that a compiled step reads no per-request list."""
        return self._pure_decode

    @property
    def num_requests(self) -> int:
        return len(self.query_lens_list)

    @property
    def num_tokens(self) -> int:
        return self.input_ids.numel()

    @property
    def prefix_lens_list(self) -> list[int]:
        """Tokens already cached before this step, per request."""
        return [c - q for q, c in zip(self.query_lens_list, self.context_lens_list)]

    @property
    def query_start_loc(self) -> list[int]:
        """Offsets of each request's tokens in the flat token axis, B + 1 entries."""
        if "query_start_loc" not in self.memo:
            starts = [0]
            for q in self.query_lens_list:
                starts.append(starts[-1] + q)
            self.memo["query_start_loc"] = starts
        return self.memo["query_start_loc"]

    @property
    def context_lens_on_device(self) -> torch.Tensor:
        """context_lens on the tokens' device, copied once per batch (decode attention reads it every layer)."""
        if self.context_lens_device is None:
            self.context_lens_device = self.context_lens.to(self.input_ids.device)
        return self.context_lens_device

    @property
    def last_token_indices(self) -> torch.Tensor:
        """Index of each request's last new token in the flat token axis: [B]."""
        if self.last_token_indices_on_device is None:
            ends = self.query_start_loc[1:]
            self.last_token_indices_on_device = torch.tensor([e - 1 for e in ends], dtype=torch.long,
                                                             device=self.input_ids.device)
        return self.last_token_indices_on_device

    def kv_for(self, layer_id: int):
        """(pool, block tables, slot mapping) holding this layer's K/V: the SWA pool's for a
        sliding layer it holds, else the KV pool's."""
        if self.swa_pool is not None and layer_id in self.swa_pool.index:
            return self.swa_pool, self.swa_block_tables, self.swa_slot_mapping
        return self.kv_pool, self.block_tables, self.slot_mapping

    def last_token_hidden(self, hidden: torch.Tensor) -> torch.Tensor:
        """The rows of `hidden` [T, ...] at each request's last new token; in a decode-only batch
        that is every row, in order, so no gather is needed."""
        return hidden if self._decode_only else hidden[self.last_token_indices]

    @classmethod
    def build(
        cls,
        *,
        token_chunks: Sequence[Sequence[int]],
        prefix_lens: Sequence[int],
        block_tables: Sequence[Sequence[int]],
        page_size: int,
        state_slots: Sequence[int],
        has_initial_state: Sequence[bool] | None = None,
        kv_pool: Any = None,
        state_pool: Any = None,
        device: torch.device | str = "cpu",
        swa_block_tables: Sequence[Sequence[int | None]] | None = None,
        swa_pool: Any = None,
    ) -> "ForwardBatch":
        """Lay out a batch from per-request Python lists.

        token_chunks[i]: request i's new tokens; prefix_lens[i]: its tokens already cached;
        block_tables[i]: its KV pages in order (at least enough for the new context);
        state_slots[i]: its state slot (None or -1 when the model has no state layers).
        has_initial_state defaults to prefix_lens[i] > 0.
        swa_block_tables[i] (with swa_pool): its SWA pages, one entry per page of its context,
        None where the window has left the page.
        """
        device = torch.device(device)
        n = len(token_chunks)
        if not (len(prefix_lens) == len(block_tables) == len(state_slots) == n):
            raise ValueError("ForwardBatch.build: token_chunks, prefix_lens, block_tables and state_slots differ in length")
        ids: list[int] = []
        positions: list[int] = []
        slots: list[int] = []
        for chunk, prefix, pages in zip(token_chunks, prefix_lens, block_tables):
            if len(pages) * page_size < prefix + len(chunk) and kv_pool is not None:
                raise ValueError(
                    f"ForwardBatch.build: {len(pages)} pages of {page_size} cannot hold {prefix + len(chunk)} tokens"
                )
            for k, tok in enumerate(chunk):
                pos = prefix + k
                ids.append(int(tok))
                positions.append(pos)
                slots.append(pages[pos // page_size] * page_size + pos % page_size if pages else -1)
        width = max(1, max((len(p) for p in block_tables), default=1),
                    max((len(p) for p in swa_block_tables or ()), default=1))
        table: list[int] = []
        for pages in block_tables:
            table.extend(int(p) for p in pages)
            table.extend([0] * (width - len(pages)))
        swa_slots: list[int] = []
        swa_table: list[int] = []
        if swa_pool is not None:
            for chunk, prefix, pages in zip(token_chunks, prefix_lens, swa_block_tables):
                for pos in range(prefix, prefix + len(chunk)):
                    page = pages[pos // page_size]
                    if page is None:
                        raise ValueError(f"ForwardBatch.build: the SWA page of new position {pos} was freed")
                    swa_slots.append(page * page_size + pos % page_size)
            for pages in swa_block_tables:
                swa_table.extend(0 if p is None else int(p) for p in pages)
                swa_table.extend([0] * (width - len(pages)))
        if has_initial_state is None:
            has_initial_state = [p > 0 for p in prefix_lens]
        has_list = [bool(h) for h in has_initial_state]
        query_lens = [len(c) for c in token_chunks]
        context_lens = [int(p) + q for p, q in zip(prefix_lens, query_lens)]
        state_list = [-1 if s is None else int(s) for s in state_slots]
        last, end = [], 0
        for q in query_lens:
            end += q
            last.append(end - 1)
        (d_ids, d_pos, d_slots, d_state, d_has, d_last, d_ctx, d_table, d_swa_slots, d_swa_table) = upload(
            [ids, positions, slots, state_list, [int(h) for h in has_list], last, context_lens, table, swa_slots,
             swa_table], device)
        return cls(
            input_ids=d_ids,
            positions=d_pos,
            query_lens=torch.tensor(query_lens, dtype=torch.int32),
            context_lens=torch.tensor(context_lens, dtype=torch.int32),
            block_tables=d_table.view(n, width).to(torch.int32),
            slot_mapping=d_slots,
            state_slots=d_state,
            has_initial_state=d_has.bool(),
            kv_pool=kv_pool,
            state_pool=state_pool,
            swa_pool=swa_pool,
            swa_block_tables=d_swa_table.view(n, width).to(torch.int32) if swa_pool is not None else None,
            swa_slot_mapping=d_swa_slots if swa_pool is not None else None,
            query_lens_list=query_lens,
            context_lens_list=context_lens,
            state_slots_list=state_list,
            has_initial_state_list=has_list,
            last_token_indices_on_device=d_last,
            context_lens_device=d_ctx.to(torch.int32),
        )
