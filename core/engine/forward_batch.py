"""ForwardBatch: what the scheduler hands the model for one forward pass.

A batch is B requests, each bringing `query_lens[i]` new tokens (a prefill chunk or one decode
token), laid out back to back in `input_ids` (T = sum of query_lens tokens). Any mix of prefill and
decode requests is allowed. Request i's context after this step holds `context_lens[i]` tokens, the
new ones included, so its cached prefix is `context_lens[i] - query_lens[i]` tokens.

KV (attention layers): the pages of request i are `block_tables[i, :ceil(context_lens[i] / page_size)]`
and token t of the batch is written at flat slot `slot_mapping[t]` = page * page_size + offset.
State (Mamba2 layers): request i reads and writes slot `state_slots[i]`; `has_initial_state[i]` is
False for the first chunk of a prompt (start from zeros) and True once the slot holds state.

The model returns logits of the last new token of each request: `[B, vocab]`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import torch


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
    # Host copies the reference kernels loop over; filled in __post_init__.
    query_lens_list: list[int] = field(init=False, repr=False)
    context_lens_list: list[int] = field(init=False, repr=False)
    state_slots_list: list[int] = field(init=False, repr=False)
    has_initial_state_list: list[bool] = field(init=False, repr=False)
    # Values derived once per batch and shared by all layers (e.g. which requests step their state).
    memo: dict = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.query_lens_list = [int(n) for n in self.query_lens.tolist()]
        self.context_lens_list = [int(n) for n in self.context_lens.tolist()]
        self.state_slots_list = [int(n) for n in self.state_slots.tolist()]
        self.has_initial_state_list = [bool(b) for b in self.has_initial_state.tolist()]
        if sum(self.query_lens_list) != self.input_ids.numel():
            raise ValueError(
                f"ForwardBatch: query_lens sum to {sum(self.query_lens_list)} but input_ids has "
                f"{self.input_ids.numel()} tokens"
            )
        for i, (q, c) in enumerate(zip(self.query_lens_list, self.context_lens_list)):
            if q < 1 or c < q:
                raise ValueError(f"ForwardBatch: request {i} has query_len {q} and context_len {c}; need 1 <= q <= c")

    @property
    def is_decode_only(self) -> bool:
        """Every request brings exactly one token (the batched decode kernels apply)."""
        return all(q == 1 for q in self.query_lens_list)

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
        if "context_lens_on_device" not in self.memo:
            self.memo["context_lens_on_device"] = self.context_lens.to(self.input_ids.device)
        return self.memo["context_lens_on_device"]

    @property
    def last_token_indices(self) -> torch.Tensor:
        """Index of each request's last new token in the flat token axis: [B]."""
        ends = self.query_start_loc[1:]
        return torch.tensor([e - 1 for e in ends], dtype=torch.long, device=self.input_ids.device)

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
    ) -> "ForwardBatch":
        """Lay out a batch from per-request Python lists.

        token_chunks[i]: request i's new tokens; prefix_lens[i]: its tokens already cached;
        block_tables[i]: its KV pages in order (at least enough for the new context);
        state_slots[i]: its state slot (None or -1 when the model has no state layers).
        has_initial_state defaults to prefix_lens[i] > 0.
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
        width = max(1, max((len(p) for p in block_tables), default=1))
        table = torch.zeros((n, width), dtype=torch.int32)
        for i, pages in enumerate(block_tables):
            if pages:
                table[i, : len(pages)] = torch.tensor(list(pages), dtype=torch.int32)
        if has_initial_state is None:
            has_initial_state = [p > 0 for p in prefix_lens]
        query_lens = [len(c) for c in token_chunks]
        return cls(
            input_ids=torch.tensor(ids, dtype=torch.long, device=device),
            positions=torch.tensor(positions, dtype=torch.long, device=device),
            query_lens=torch.tensor(query_lens, dtype=torch.int32),
            context_lens=torch.tensor([p + q for p, q in zip(prefix_lens, query_lens)], dtype=torch.int32),
            block_tables=table.to(device),
            slot_mapping=torch.tensor(slots, dtype=torch.long, device=device),
            state_slots=torch.tensor([-1 if s is None else int(s) for s in state_slots], dtype=torch.long, device=device),
            has_initial_state=torch.tensor(list(has_initial_state), dtype=torch.bool, device=device),
            kv_pool=kv_pool,
            state_pool=state_pool,
        )
