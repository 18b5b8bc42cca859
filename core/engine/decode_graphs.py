"""Decode steps replayed from device graphs: on by default where the device has them (CUDA graphs;
XPU graphs where torch has torch.xpu.XPUGraph), eager elsewhere (CPU); BRINGUP_CUDA_GRAPHS=0 turns
them off.

A decode-only step of n requests is padded to the smallest captured batch size (bucket) >= n and
replayed from that bucket's graph, so the host launches one graph instead of hundreds of kernels.
Padding rows read and write one scratch KV page and one scratch state slot reserved for them (a
request's cache is never touched); their logits are dropped. A model with an SWA pool (sliding layers
beside full ones: Gemma 2/3, gpt-oss) has a second static block table and slot mapping for it, and a
scratch SWA page for the padding rows; its rows are updated as the KV table's (a page the window has
left keeps its stale entry: the kernels never read outside the window). Each bucket keeps one static
ForwardBatch whose tensors the graph reads; a step's values are uploaded in one copy and copied
into it on the device. This needs a decode step with no host reads (tests/core/engine/test_engine_host_syncs.py).

The padding and the static-buffer plumbing are tested on the CPU with a stand-in for the graph
that re-runs the captured call; the padding page and slot are allocated beyond the plan's pools
(Engine), so all N of N running requests run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from .forward_batch import ForwardBatch, upload

DEFAULT_BUCKETS = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 160, 192, 256)
# Longest context a captured step serves (its block tables are this wide); longer requests run eagerly.
MAX_GRAPH_CONTEXT = 32768
PADDING_OWNER = "cuda-graph padding"  # owns the scratch page and slot in the pools


def buckets_up_to(max_batch: int, sizes: Sequence[int] = DEFAULT_BUCKETS) -> tuple[int, ...]:
    """The bucket sizes below max_batch, and max_batch itself (so every batch the engine runs fits)."""
    if max_batch < 1:
        raise ValueError(f"max_batch must be at least 1, got {max_batch}")
    return tuple(sorted({b for b in sizes if 0 < b < max_batch} | {max_batch}))


def bucket_for(n: int, buckets: Sequence[int]) -> int | None:
    """The smallest bucket holding n requests, or None when none does."""
    return next((b for b in sorted(buckets) if b >= n), None)


@dataclass(frozen=True)
class PaddedDecode:
    """ForwardBatch.build arguments for a decode step padded to `bucket` rows."""

    token_chunks: list[list[int]]
    prefix_lens: list[int]
    block_tables: list[list[int]]
    state_slots: list[int]
    swa_block_tables: list[list[int | None]] | None = None


def pad_decode(tokens: Sequence[int], prefix_lens: Sequence[int], block_tables: Sequence[Sequence[int]],
               state_slots: Sequence[int | None], *, bucket: int, width: int, scratch_page: int,
               scratch_slot: int, swa_block_tables: Sequence[Sequence[int | None]] | None = None,
               scratch_swa_page: int | None = None) -> PaddedDecode:
    """Request i brings tokens[i] after prefix_lens[i] cached tokens. Padding rows bring token 0 at
    position 0 into the scratch page and slot (and the scratch SWA page). Tables stay as long as they
    are (the runner copies them into the left of the static table, whose other entries are valid pages
    nobody attends to)."""
    n = len(tokens)
    if (swa_block_tables is None) != (scratch_swa_page is None):
        raise ValueError("pad_decode: SWA block tables and the scratch SWA page go together")
    if swa_block_tables is not None and len(swa_block_tables) != n:
        raise ValueError("pad_decode: swa_block_tables and tokens differ in length")
    if not (len(prefix_lens) == len(block_tables) == len(state_slots) == n):
        raise ValueError("pad_decode: tokens, prefix_lens, block_tables and state_slots differ in length")
    if n > bucket:
        raise ValueError(f"pad_decode: {n} requests do not fit a bucket of {bucket}")
    too_wide = [len(p) for p in block_tables if len(p) > width]
    if too_wide:
        raise ValueError(f"pad_decode: a request holds {too_wide[0]} pages, more than the captured width {width}")
    pad = bucket - n
    return PaddedDecode(
        token_chunks=[[int(t)] for t in tokens] + [[0]] * pad,
        prefix_lens=[int(p) for p in prefix_lens] + [0] * pad,
        block_tables=[list(p) for p in block_tables] + [[scratch_page]] * pad,
        state_slots=[scratch_slot if s is None else int(s) for s in state_slots] + [scratch_slot] * pad,
        swa_block_tables=None if swa_block_tables is None else
        [list(p) for p in swa_block_tables] + [[scratch_swa_page]] * pad,
    )


def _graph_api(device_type: str):
    """(backend module, graph class, graph context manager) for a device type, or None."""
    backend = getattr(torch, device_type, None)
    if device_type == "cuda" and backend is not None and backend.is_available():
        return backend, backend.CUDAGraph, backend.graph
    if device_type == "xpu" and backend is not None and hasattr(backend, "XPUGraph") and hasattr(backend, "graph"):
        return backend, backend.XPUGraph, backend.graph
    return None


def graphs_supported(device) -> bool:
    return _graph_api(torch.device(device).type) is not None


class _DeviceGraph:
    """torch.cuda.CUDAGraph (or torch.xpu.XPUGraph) behind the two calls the runner needs (the CPU
    tests pass a stand-in)."""

    def __init__(self, device, pool):
        self.backend, graph_cls, self.graph_ctx = _graph_api(device.type)
        self.graph, self.device, self.pool = graph_cls(), device, pool

    def capture(self, fn: Callable[[], torch.Tensor]) -> torch.Tensor:
        b = self.backend
        side = b.Stream(self.device)
        side.wait_stream(b.current_stream(self.device))
        with b.stream(side):  # warm up (Triton compiles, allocator settles) off the capture
            for _ in range(2):
                fn()
        b.current_stream(self.device).wait_stream(side)
        with self.graph_ctx(self.graph, pool=self.pool):
            return fn()

    def replay(self) -> None:
        self.graph.replay()


class DecodeGraphs:
    """One captured decode step per bucket; `run` pads a decode step, replays, returns [n, vocab]."""

    def __init__(self, model, kv_pool, state_pool, *, buckets: Sequence[int], width: int, scratch_page: int,
                 scratch_slot: int, device, graph_factory: Callable | None = None, swa_pool=None,
                 scratch_swa_page: int | None = None):
        if swa_pool is not None and scratch_swa_page is None:
            raise ValueError("DecodeGraphs: a model with an SWA pool needs a scratch SWA page for the padding rows")
        self.model, self.kv_pool, self.state_pool = model, kv_pool, state_pool
        self.swa_pool, self.scratch_swa_page = swa_pool, scratch_swa_page
        self.buckets, self.width = tuple(sorted(buckets)), int(width)
        self.scratch_page, self.scratch_slot = scratch_page, scratch_slot
        self.device = torch.device(device)
        if graph_factory is None:
            pool = _graph_api(self.device.type)[0].graph_pool_handle()
            graph_factory = lambda: _DeviceGraph(self.device, pool)  # noqa: E731 - one shared memory pool
        started = time.monotonic()
        self._graphs: dict[int, tuple[object, ForwardBatch, torch.Tensor]] = {}
        self._steps: dict[int, torch.Tensor] = {}  # bucket -> [4 or 5, bucket] int64 step values the graph reads
        self._rows: dict[int, list] = {}  # bucket -> per row: (pages list, entries written) in the static table
        self._swa_rows: dict[int, list] = {}  # the same for the static SWA table
        with torch.inference_mode():
            for bucket in reversed(self.buckets):  # largest first: smaller graphs reuse its memory
                swa = None if swa_pool is None else []
                padded = pad_decode([], [], [], [], bucket=bucket, width=self.width, scratch_page=scratch_page,
                                    scratch_slot=scratch_slot, swa_block_tables=swa, scratch_swa_page=scratch_swa_page)
                padded.block_tables[:] = [[scratch_page] * self.width] * bucket  # the captured width
                if swa is not None:
                    padded.swa_block_tables[:] = [[scratch_swa_page] * self.width] * bucket
                static = self._batch(padded)
                self._steps[bucket] = self._step_buffer(static)
                self._rows[bucket] = [None] * bucket
                self._swa_rows[bucket] = [None] * bucket
                graph = graph_factory()
                logits = graph.capture(lambda static=static: self.model(static))
                self._graphs[bucket] = (graph, static, logits)
        self.capture_seconds = time.monotonic() - started

    def _batch(self, padded: PaddedDecode) -> ForwardBatch:
        return ForwardBatch.build(
            token_chunks=padded.token_chunks, prefix_lens=padded.prefix_lens, block_tables=padded.block_tables,
            page_size=self.kv_pool.page_size if self.kv_pool is not None else 1, state_slots=padded.state_slots,
            has_initial_state=[True] * len(padded.token_chunks), kv_pool=self.kv_pool, state_pool=self.state_pool,
            device=self.device, swa_pool=self.swa_pool, swa_block_tables=padded.swa_block_tables)

    @staticmethod
    def _step_buffer(static: ForwardBatch) -> torch.Tensor:
        """One [4, bucket] int64 buffer whose rows ARE the static batch's input_ids, positions,
        slot_mapping and state_slots (and a fifth, swa_slot_mapping, with an SWA pool), so a step's
        values arrive in one copy."""
        rows = [static.input_ids, static.positions, static.slot_mapping, static.state_slots]
        if static.swa_pool is not None:
            rows.append(static.swa_slot_mapping)
        buf = torch.stack(rows)
        views = buf.unbind(0)
        static.input_ids, static.positions, static.slot_mapping, static.state_slots = views[:4]
        if static.swa_pool is not None:
            static.swa_slot_mapping = views[4]
        return buf

    def fits(self, n: int, block_tables: Sequence[Sequence[int]]) -> bool:
        return bucket_for(n, self.buckets) is not None and all(len(p) <= self.width for p in block_tables)

    def _table_updates(self, rows: list, block_tables, scratch: int) -> tuple[list[int], list[int]]:
        """(flat indices, pages) of the static block table entries this step changes. A row keeps
        the request's page list it was written from and how much of it: a request that stays in its
        row sends only its new pages (one every page_size steps), a new one its whole row. An SWA
        entry the window has left (None) is written as the scratch page: read, never attended to."""
        width = self.width
        index, pages = [], []
        for i, table in enumerate(block_tables):
            known = rows[i]
            start = known[1] if known is not None and known[0] is table and known[1] <= len(table) else 0
            if start < len(table):
                index.extend(range(i * width + start, i * width + len(table)))
                pages.extend(scratch if p is None else p for p in table[start:])
                rows[i] = (table, len(table))
        for i in range(len(block_tables), len(rows)):  # padding rows read the scratch page (column 0)
            if rows[i] is not None:
                index.append(i * width)
                pages.append(scratch)
                rows[i] = None
        return index, pages

    def run(self, tokens, prefix_lens, block_tables, state_slots,
            future: torch.Tensor | None = None, swa_block_tables=None) -> torch.Tensor:
        """Logits [n, vocab] of one decode step (one new token per request, each continuing its state).
        Host work is one pass over the requests and one upload: the static block table is updated
        only where it changed (see _table_updates); padding rows bring token 0 at position 0 into the
        scratch page and slot. `future`: the device's last sampled token per state slot, for the
        FUTURE placeholders of overlapped steps. `swa_block_tables`: each request's SWA pages
        (None where the window has left), given exactly when the graphs were captured with an SWA pool."""
        if (swa_block_tables is None) != (self.swa_pool is None):
            raise ValueError("DecodeGraphs.run: SWA block tables are needed exactly when the graphs have an SWA pool")
        n = len(tokens)
        bucket = bucket_for(n, self.buckets)
        if bucket is None:
            raise ValueError(f"{n} requests exceed the largest captured decode batch ({self.buckets[-1]})")
        too_wide = [len(p) for p in block_tables if len(p) > self.width]
        if too_wide:
            raise ValueError(f"a request holds {too_wide[0]} pages, more than the captured width {self.width}")
        graph, static, logits = self._graphs[bucket]
        pad = bucket - n
        ps = self.kv_pool.page_size if self.kv_pool is not None else 1
        if self.kv_pool is not None:
            kv_slots = [t[p // ps] * ps + p % ps for t, p in zip(block_tables, prefix_lens)]
        else:
            kv_slots = [-1] * n
        scratch_kv = self.scratch_page * ps if self.kv_pool is not None else -1
        slots = [self.scratch_slot if s is None else s for s in state_slots]
        index, pages = (self._table_updates(self._rows[bucket], block_tables, self.scratch_page)
                        if self.kv_pool is not None else ([], []))
        values = (list(tokens) + [0] * pad + list(prefix_lens) + [0] * pad + kv_slots + [scratch_kv] * pad
                  + slots + [self.scratch_slot] * pad)
        swa_index, swa_pages = [], []
        if self.swa_pool is not None:
            values += [t[p // ps] * ps + p % ps for t, p in zip(swa_block_tables, prefix_lens)]
            values += [self.scratch_swa_page * ps] * pad
            swa_index, swa_pages = self._table_updates(self._swa_rows[bucket], swa_block_tables, self.scratch_swa_page)
        step, ctx, index_d, pages_d, swa_index_d, swa_pages_d = upload(
            [values, [p + 1 for p in prefix_lens] + [1] * pad, index, pages, swa_index, swa_pages], self.device)
        self._steps[bucket].view(-1).copy_(step)
        if future is not None:  # overlapped steps: a FUTURE (-1) token is the one sampled last, by state slot
            ids, slot_ids = self._steps[bucket][0], self._steps[bucket][3]
            ids.copy_(torch.where(ids < 0, future[slot_ids], ids))
        static.context_lens_device.copy_(ctx)
        if index:
            static.block_tables.view(-1)[index_d] = pages_d.to(static.block_tables.dtype)
        if swa_index:
            static.swa_block_tables.view(-1)[swa_index_d] = swa_pages_d.to(static.swa_block_tables.dtype)
        graph.replay()
        return logits[:n].clone()
