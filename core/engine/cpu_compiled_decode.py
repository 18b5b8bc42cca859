"""Decode steps on the CPU through torch.compile: the CPU's counterpart of the GPUs' decode graphs.

An eager decode step of the default model (52 blocks) dispatches about 2,300 small tensor ops; on
one core they cost more than the products (about 15 of 26 ms at 8 requests). Compiled with
inductor, the ops between the products (norms, residual adds, the Mamba conv and state update, the
routing, the KV write) become a few fused C++ loops, while the products, the MoE and the decode
attention run as they do eagerly, called as opaque operators (kernels/cpu/opaque.py) that still
choose MKL or oneDNN, the MoE's form and the packed copies at run time.

One compiled graph serves every decode batch: the batch size and the block tables' width are
dynamic, so there is no padding and no per-size capture. The batch size is one unbacked symbol
shared by every per-request tensor (`mark_unbacked(..., shape_id=...)`, which torch 2.13 has), so
a lone request needs no graph of its own; where torch lacks that, the size is marked dynamic and a
lone request, which torch specialises, gets a second graph. They are compiled at start-up
(`warm_up`). A later start of the same model loads the step saved by the first
(saved_decode_step.py: no trace, no compile), else inductor's on-disk cache spares it the C++ compiles. Prompt steps stay eager (their chunked scan reads
lengths on the host). The pools keep one tensor per layer (pools.py) so that the step writes the states and K/V
where they lie instead of copying a whole pool back.

Compiling needs a C++ compiler; if torch.compile fails for any reason the error is logged and
decode steps run eagerly, as before. So does a batch that would need a new graph torch cannot
build (`COMPILE_ERRORS`, raised while tracing, before anything ran: the eager step then runs it).
"""

from __future__ import annotations

import inspect
import os
import time
from pathlib import Path

import torch

from . import saved_decode_step
from .saved_decode_step import use_bringup_inductor_cache
from .forward_batch import ForwardBatch

# The ForwardBatch tensors whose first dimension is the number of requests (or of tokens: one each).
_PER_REQUEST = ("input_ids", "positions", "slot_mapping", "state_slots", "has_initial_state", "block_tables",
                "context_lens_device", "last_token_indices_on_device")
MIN_TABLE_WIDTH = 2  # torch specialises a dimension of size 1: narrower tables are padded to this
# Whether this torch can tie the per-request dimensions to one unbacked size (one graph for any batch).
ONE_GRAPH = "shape_id" in inspect.signature(torch._dynamo.decorators.mark_unbacked).parameters


# What torch raises when it cannot trace or compile a step (InductorError and BackendCompilerFailed are
# TorchDynamoExceptions too); other errors are the step's own and propagate.
COMPILE_ERRORS = (torch._dynamo.exc.TorchDynamoException,)


def error_summary(err: BaseException) -> str:
    """'Type: first line' of a compile error (torch's run to pages of trace)."""
    first = (str(err).strip().splitlines() or [""])[0][:300]
    return f"{type(err).__name__}: {first}" if first else type(err).__name__


# torch's own timers (torch._dynamo.utils.compilation_time_metrics) -> the words the start-up log uses.
# (Default model, cold, busy 2-core box: trace 37 s, AOT autograd and inductor 113 s of 173 s; the rest
# is guards, saving and the first run.)
_PHASES = (("bytecode_tracing", "dynamo trace"), ("create_aot_dispatcher_function", "AOT autograd and inductor"))


def _phase_seconds() -> dict[str, float]:
    metrics = torch._dynamo.utils.compilation_time_metrics
    return {words: sum(metrics[key]) for key, words in _PHASES if metrics.get(key)}


def phase_breakdown(before: dict[str, float]) -> str:
    """'dynamo trace 19.2 s, AOT autograd and inductor 7.7 s': what torch timed since `before`
    (_phase_seconds()), or '' when it timed nothing (a loaded step)."""
    after = _phase_seconds()
    spent = {k: v - before.get(k, 0.0) for k, v in after.items()}
    return ", ".join(f"{k} {v:.1f} s" for k, v in spent.items() if v >= 0.05)


class CompiledDecode:
    """`model(batch)` for decode batches, compiled once for any batch size and context length."""

    def __init__(self, model, one_graph: bool = ONE_GRAPH, save_steps: bool = True, *, traces: bool = True):
        self._inductor_cache = use_bringup_inductor_cache()
        # False for a step loaded beside a serving engine (background_decode_step.py): a batch its
        # guards refuse returns None (the eager step runs it) instead of a trace that would stall serving.
        self.traces = traces
        self._model = model
        self._compiled = torch.compile(model, fullgraph=True)
        self.one_graph = one_graph
        self.compile_seconds = 0.0
        # A saved step (saved_decode_step.py), where this torch has them and one graph serves all sizes.
        self.save_steps = save_steps and one_graph and saved_decode_step.available()
        self._saved = None  # SavedStep, loaded or compiled at warm_up
        self._saved_marked = False  # whether its guards want the marks (compiled here, not loaded)
        self.how = "traced and compiled"  # what warm_up did, for the start-up log
        self.phases = ""  # where warm_up's time went, in torch's timers ('' when nothing was traced)

    @staticmethod
    def takes(batch: ForwardBatch) -> bool:
        """Whether this batch runs compiled: every request decodes one token from a state it holds."""
        return batch.is_pure_decode and batch.swa_pool is None

    def __call__(self, batch: ForwardBatch) -> torch.Tensor | None:
        if batch.block_tables.shape[1] < MIN_TABLE_WIDTH:  # (extra entries are never attended to)
            batch.block_tables = torch.nn.functional.pad(batch.block_tables,
                                                         (0, MIN_TABLE_WIDTH - batch.block_tables.shape[1]))
        if self._saved is not None:
            # The guards of a step compiled in this process look for the dynamic dimensions' marks;
            # those of a loaded one for none (torch saves no marks).
            if self._saved_marked:
                self._mark_dynamic(batch)
            out = self._saved.try_run(batch)
            if out is not None or not self.traces:
                return out
        self._mark_dynamic(batch)
        return self._compiled(batch)

    def _mark_dynamic(self, batch: ForwardBatch) -> None:
        tensors = [t for t in (getattr(batch, name) for name in _PER_REQUEST) if t is not None]
        if self.one_graph:
            for tensor in tensors:
                torch._dynamo.decorators.mark_unbacked(tensor, 0, shape_id="requests")
        elif batch.num_requests > 1:
            for tensor in tensors:
                torch._dynamo.mark_dynamic(tensor, 0)
        torch._dynamo.mark_dynamic(batch.block_tables, 1)

    def load_saved(self, path: Path) -> None:
        """Take the step saved at `path` (raises when there is none or torch cannot read it)."""
        self._saved = saved_decode_step.load(self._model, path)
        if self._saved is None:
            raise FileNotFoundError(f"no saved decode step at {path}")
        self.how = f"loaded from {path}"

    def _load_or_save(self, batch: ForwardBatch, key: str) -> None:
        """The saved step for `key` if there is one, else compile it on `batch` and save it."""
        path = saved_decode_step.steps_dir(self._inductor_cache) / f"{key}.bin"
        try:
            self._saved = saved_decode_step.load(self._model, path)
        except Exception as err:  # noqa: BLE001 - a file torch cannot read back: compile afresh
            self._saved, self.how = None, f"saved step unreadable ({error_summary(err)}), "
        if self._saved is not None:
            self.how = f"loaded from {path}"
            return
        if batch.block_tables.shape[1] < MIN_TABLE_WIDTH:
            batch.block_tables = torch.nn.functional.pad(batch.block_tables,
                                                         (0, MIN_TABLE_WIDTH - batch.block_tables.shape[1]))
        self._mark_dynamic(batch)
        unread = self.how if self.how.startswith("saved step") else ""
        try:
            self._saved, failed = saved_decode_step.compile_and_save(self._model, batch, path)
        except COMPILE_ERRORS + (RuntimeError,) as err:  # the usual compile may still manage
            self.how = unread + f"traced and compiled (the saveable compile failed: {error_summary(err)})"
            return
        self._saved_marked = True
        self.how = unread + ("traced, compiled and saved to " + str(path) if failed is None
                             else f"traced and compiled; not saved ({failed})")

    def warm_up(self, kv_pool, state_pool, max_batch: int, owner: str = "compile warm-up") -> float:
        """Compile now, on a throw-away decode step of one request (and one of max_batch without
        ONE_GRAPH): the first compile takes a minute or more on two cores, later starts read
        inductor's cache. The pages and slots used are taken from the pools and given back (a slot
        is zeroed when next taken, a page's stale K/V is never attended to). Returns the seconds spent."""
        started, phases = time.monotonic(), _phase_seconds()
        key = saved_decode_step.step_key(self._model, kv_pool, state_pool) if self.save_steps else None
        for n in (1,) if self.one_graph else sorted({max(1, max_batch), 1}, reverse=True):
            pages = kv_pool.alloc(n, owner) if kv_pool.layer_ids else [0] * n
            slots = [state_pool.alloc(owner) for _ in range(n)] if state_pool.layer_ids else [-1] * n
            try:
                with torch.inference_mode():  # (as the runner's steps: inference tensors, or a guard fails)
                    batch = ForwardBatch.build(
                        token_chunks=[[0]] * n, prefix_lens=[1] * n, block_tables=[[p] for p in pages],
                        page_size=kv_pool.page_size, state_slots=slots, has_initial_state=[True] * n,
                        kv_pool=kv_pool if kv_pool.layer_ids else None,
                        state_pool=state_pool if state_pool.layer_ids else None, device=torch.device("cpu"))
                    if key is not None:
                        self._load_or_save(batch, key)
                    self(batch)
            finally:
                if kv_pool.layer_ids:
                    kv_pool.free(pages)
                for slot in slots:
                    if slot >= 0:
                        state_pool.free(slot)
        self.compile_seconds = time.monotonic() - started
        self.phases = phase_breakdown(phases)
        return self.compile_seconds
