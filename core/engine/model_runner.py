"""The model runner: everything that touches tensors, nothing that decides who runs.

It owns the model, the pools' tensors (KV, SWA when the model has one, state: the scheduler hands out their pages and slots), the
captured decode graphs (on the CPU, the compiled decode step) and sampling. One call turns a
scheduled step into one sampled token per request that reached the end of its known tokens:

    tokens = runner.run(step)   # [token or None per scheduled request]

A step is laid out as a ForwardBatch (forward_batch.py), run as one forward pass (or replayed from a
decode graph, decode_graphs.py) and sampled in one batched call (sampling.py). The one host read per
step is the sampled tokens themselves.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import torch

from bringup.core.errors import UserError

from .forward_batch import ForwardBatch, upload
from .pools import KVPool, StatePool, SWAPool
from .request import FUTURE
from . import logprobs as lp
from .sampling import sample

GB = 1024**3


@dataclass
class Launched:
    """A step queued on the device (ModelRunner.launch): what `resolve` reads back."""

    step: object  # the ScheduledStep
    sampled: list[bool]  # which of its requests sample a token
    started: float  # when the host began it (monotonic seconds)
    graphed: bool  # it ran as a graph replay or the compiled step
    host: torch.Tensor | None = None  # the sampled tokens on the host (pinned; valid once `event` is done)
    event: object = None  # torch.cuda.Event recorded after the copy
    prefill: tuple[int, int] = (0, 0)  # (new sequences, prompt tokens), for the batch log
    logprobs: tuple | None = None  # (requests, counts, device tensors) of the rows that asked (logprobs.py)


def uses_swa_pool(spec) -> bool:
    """Sliding-window layers beside full ones get their own pool (SGLang's SWA pool); a model whose
    attention layers all slide (or none) keeps them in the one KV pool."""
    return bool(spec.swa_layer_ids) and spec.sliding_window > 0 and set(spec.kv_layer_ids) > set(spec.swa_layer_ids)


def step_inputs(step) -> tuple[list, list, list, list]:
    """Per scheduled request: its new tokens, tokens already cached, KV pages, state slot."""
    chunks, prefix_lens, tables, slots = [], [], [], []
    for req, n in zip(step.requests, step.num_new_tokens):
        chunks.append(req.token_slice(req.num_computed, n))
        prefix_lens.append(req.num_computed)
        tables.append(req.pages)
        slots.append(req.state_slot)
    return chunks, prefix_lens, tables, slots


def build_batch(step, kv_pool: KVPool, state_pool: StatePool, device, swa_pool: SWAPool | None = None) -> ForwardBatch:
    """The ForwardBatch of a scheduled step (the pools a model without such layers lacks are left out)."""
    chunks, prefix_lens, tables, slots = step_inputs(step)
    return ForwardBatch.build(
        token_chunks=chunks, prefix_lens=prefix_lens, block_tables=tables, page_size=kv_pool.page_size,
        state_slots=slots, kv_pool=kv_pool if kv_pool.layer_ids else None,
        state_pool=state_pool if state_pool.layer_ids else None, device=device,
        swa_pool=swa_pool, swa_block_tables=[r.swa_pages for r in step.requests] if swa_pool is not None else None,
    )


class ModelRunner:
    def __init__(self, model, *, device, num_pages: int, page_size: int, num_slots: int, kv_dtype, conv_dtype,
                 ssm_dtype, log: Callable[[str], None], swa_pages: int = 0):
        self.model, self.device, self.log = model, device, log
        spec = model.cache_spec
        swa_ids = spec.swa_layer_ids if uses_swa_pool(spec) else ()
        full_ids = tuple(i for i in spec.kv_layer_ids if i not in swa_ids)
        try:
            self.kv_pool = KVPool(num_pages, page_size, full_ids, spec.num_kv_heads or 1,
                                  spec.head_dim or 1, kv_dtype, device, v_head_dim=spec.v_head_dim or None,
                                  latent=spec.latent_kv)
            self.swa_pool = SWAPool(swa_pages, page_size, swa_ids, spec.num_kv_heads, spec.head_dim,
                                    spec.sliding_window, kv_dtype, device) if swa_ids else None
            self.state_pool = StatePool(num_slots, spec.state_layer_ids, spec.conv_shape or (1,),
                                        spec.ssm_shape or (1,), conv_dtype, ssm_dtype, device)
        except (torch.OutOfMemoryError, MemoryError) as err:
            raise UserError(
                f"allocating the pools ({num_pages * page_size} KV tokens, {num_slots} state slots) ran out of "
                f"memory on {device}: {str(err).splitlines()[0][:200]}; lower --mem-fraction or "
                "--max-running-requests"
            ) from None
        if spec.kv_layer_ids:
            log(f"KV Cache is allocated. dtype: {_name(kv_dtype)}, #tokens: {self.kv_pool.capacity_tokens}, "
                f"K size: {self.kv_pool.k_bytes / GB:.2f} GB, V size: {self.kv_pool.v_bytes / GB:.2f} GB")
        if self.swa_pool is not None:
            swa = self.swa_pool
            log(f"SWA KV Cache is allocated. window: {swa.window}, #tokens: {swa.capacity_tokens}, "
                f"K size: {swa.k_bytes / GB:.2f} GB, V size: {swa.v_bytes / GB:.2f} GB")
        if spec.state_layer_ids:
            log(f"Mamba Cache is allocated. max_mamba_cache_size: {num_slots}, "
                f"conv_state size: {self.state_pool.conv_bytes / GB:.2f}GB, "
                f"ssm_state size: {self.state_pool.ssm_bytes / GB:.2f}GB ")
        # Overlapped steps: each request's last sampled token, on the device, by state slot (the next
        # step reads a FUTURE placeholder's value from here; no host read in between).
        self.future_tokens = torch.zeros(max(1, num_slots), dtype=torch.long, device=device)
        self.decode_graphs = None
        self.compiled_decode = None  # CPU: decode steps through torch.compile (cpu_compiled_decode.py)
        self.last_step_graphed = False  # the last forward was a graph replay or the compiled step (the log says so)

    @property
    def uses_kv(self) -> bool:
        return bool(self.kv_pool.layer_ids)

    # Decode graphs ------------------------------------------------------------------------------
    def capture_decode_graphs(self, *, max_batch: int, max_context: int | None, scratch_page: int | None,
                              scratch_slot: int, scratch_swa_page: int | None = None, graph_factory=None):
        """Decode steps replayed from CUDA graphs, one per batch-size bucket up to max_batch; padding
        rows use the scratch page and slot, and the scratch SWA page where the model has an SWA pool
        (reserved for good by the caller). See decode_graphs.py."""
        from .decode_graphs import MAX_GRAPH_CONTEXT, DecodeGraphs, buckets_up_to

        context = min(max_context or MAX_GRAPH_CONTEXT, self.kv_pool.capacity_tokens, MAX_GRAPH_CONTEXT)
        width = self.kv_pool.pages_for(context) if self.uses_kv else 1
        buckets = buckets_up_to(max_batch)
        # A gated MoE times its decode forms per batch size, in each capture's eager warm-up run of that size.
        forms = getattr(getattr(self.model, "ops", None), "moe_gated_decode_forms", None)
        if forms is not None:
            forms.measure_at(buckets)
        started = time.monotonic()
        self.decode_graphs = DecodeGraphs(
            self.model, self.kv_pool if self.uses_kv else None, self.state_pool if self.state_pool.layer_ids else None,
            buckets=buckets, width=width, scratch_page=scratch_page or 0, scratch_slot=scratch_slot,
            device=self.device, graph_factory=graph_factory, swa_pool=self.swa_pool,
            scratch_swa_page=scratch_swa_page)
        self.log(f"Capture cuda graph end. Time elapsed: {time.monotonic() - started:.2f} s. "
                 f"bs: {list(self.decode_graphs.buckets)}")
        for line in forms.describe() if forms is not None else ():
            self.log(line)
        return self.decode_graphs

    # One step -----------------------------------------------------------------------------------
    def forward(self, step) -> torch.Tensor:
        """Logits [B, vocab] of a scheduled step: from a captured graph for a decode step that fits
        one (on the CPU, the compiled step for any decode step), else one forward pass over the batch.
        On the CPU a mixed step runs as two: its decode rows through the compiled step, its prompt
        rows eagerly (see `_split_mixed`)."""
        split = self._split_mixed(step)
        if split is not None:
            return self._forward_split(step, *split)
        return self._forward_one(step)

    def _split_mixed(self, step):
        """(decode rows, prompt rows) of a mixed step worth running apart, else None. On the CPU the
        compiled decode step is several times faster than the eager one for the same rows and the
        weights are cheap to read twice; on a GPU a second forward would read the weights again
        (13 ms for Nemotron-3-Nano on an H200), so a mixed step stays one eager forward there."""
        if self.compiled_decode is None or len(step.requests) < 2:
            return None
        decode, prompt = [], []
        for i, (req, n) in enumerate(zip(step.requests, step.num_new_tokens)):
            is_decode = n == 1 and req.num_computed >= len(req.prompt_ids) and req.num_computed > 0
            (decode if is_decode else prompt).append(i)
        return (decode, prompt) if decode and prompt else None

    def _forward_split(self, step, decode: list[int], prompt: list[int]) -> torch.Tensor:
        from .scheduler import ScheduledStep

        def part(rows):
            return ScheduledStep([step.requests[i] for i in rows], [step.num_new_tokens[i] for i in rows], [])

        first = self._forward_one(part(decode))
        graphed = self.last_step_graphed
        second = self._forward_one(part(prompt))
        self.last_step_graphed = graphed
        logits = first.new_empty((len(step.requests), first.shape[-1]))
        index = upload([decode, prompt], logits.device)
        logits[index[0]] = first
        logits[index[1]] = second.to(first.dtype)
        return logits

    def _forward_one(self, step) -> torch.Tensor:
        self.last_step_graphed = True
        if self.decode_graphs is not None:
            chunks, prefix_lens, tables, slots = step_inputs(step)
            if (all(len(c) == 1 for c in chunks) and all(p > 0 for p in prefix_lens)
                    and self.decode_graphs.fits(len(chunks), tables)):
                future = self.future_tokens if any(c[0] == FUTURE for c in chunks) else None
                swa = [r.swa_pages for r in step.requests] if self.swa_pool is not None else None
                return self.decode_graphs.run([c[0] for c in chunks], prefix_lens, tables, slots, future=future,
                                              swa_block_tables=swa)
        batch = build_batch(step, self.kv_pool, self.state_pool, self.device, self.swa_pool)
        self._fill_future(batch, step)
        if self.compiled_decode is not None and self.compiled_decode.takes(batch):
            # (imported here: the module imports torch._dynamo, seconds an engine without it never pays)
            from .cpu_compiled_decode import COMPILE_ERRORS, error_summary

            try:
                logits = self.compiled_decode(batch)
                if logits is not None:  # (None: a loaded step that does not cover this batch; it runs eagerly)
                    return logits
            except COMPILE_ERRORS as err:  # a batch torch cannot build a graph for: eager from now on
                self.compiled_decode = None
                self.log(f"CPU: compiling the decode step failed on a batch of {batch.num_requests} "
                         f"({error_summary(err)}); decode steps run eagerly from now on")
        self.last_step_graphed = False
        return self.model(batch)

    def _fill_future(self, batch, step) -> None:
        """Put the device's values in place of the FUTURE placeholders of a batch (decode rows whose
        input is the token the step before sampled, still on the device)."""
        rows = [i for i, (r, n) in enumerate(zip(step.requests, step.num_new_tokens))
                if n == 1 and r.output_ids and r.output_ids[-1] == FUTURE and r.num_computed == r.num_tokens - 1]
        if not rows:
            return
        starts = batch.query_start_loc
        pos, slots = upload([[starts[i] for i in rows], [step.requests[i].state_slot for i in rows]],
                            batch.input_ids.device)
        batch.input_ids[pos] = self.future_tokens[slots]

    def compile_decode(self, max_batch: int) -> float:
        """Compile the CPU's decode step now (cpu_compiled_decode.py); returns the seconds it took."""
        from .cpu_compiled_decode import CompiledDecode

        compiled = CompiledDecode(self.model)
        seconds = compiled.warm_up(self.kv_pool, self.state_pool, max_batch)
        self.compiled_decode = compiled
        return seconds

    @torch.inference_mode()
    def launch(self, step, sampled: list[bool]) -> "Launched":
        """Queue a scheduled step's forward and sampling on the device and return at once (no host
        read): the sampled tokens go to `future_tokens` for the next step and, in one device-to-host
        copy, to the host, read by `resolve` once the device has run the step."""
        started = time.monotonic()
        logits = self.forward(step)
        rows = [i for i, s in enumerate(sampled) if s]
        launched = Launched(step, list(sampled), started, self.last_step_graphed)
        if not rows:
            return launched
        reqs = [step.requests[i] for i in rows]
        picked = logits if len(rows) == len(sampled) else logits[upload([rows], logits.device)[0]]
        tokens = sample(picked, [r.params for r in reqs], [r.generator for r in reqs])
        launched.logprobs = _logprobs_on_device(picked, tokens, reqs)
        (slots,) = upload([[r.state_slot for r in reqs]], tokens.device)
        self.future_tokens[slots] = tokens
        if tokens.device.type == "cuda":
            launched.host = torch.empty(tokens.shape, dtype=tokens.dtype, pin_memory=True)
            launched.host.copy_(tokens, non_blocking=True)
            launched.event = torch.cuda.Event()
            launched.event.record()
        else:  # the CPU computes as it goes; other devices: a plain copy (it waits for the device)
            launched.host = tokens.cpu()
        return launched

    @staticmethod
    def resolve(launched: "Launched") -> list[int]:
        """The launched step's sampled tokens on the host (waits for the device to finish that step,
        not the ones queued after it)."""
        if launched.host is None:
            return []
        if launched.event is not None:
            launched.event.synchronize()
        _logprobs_to_requests(launched.logprobs)
        return launched.host.tolist()

    @torch.inference_mode()
    def run(self, step) -> list[int | None]:
        """Run a scheduled step (before the scheduler records it): the sampled token of each request
        that reaches the end of its known tokens, None for the others (a prompt chunk mid-way)."""
        logits = self.forward(step)
        sampled = step.samples()
        out: list[int | None] = [None] * len(sampled)
        rows = [i for i, s in enumerate(sampled) if s]
        if rows:
            reqs = [step.requests[i] for i in rows]
            picked = logits if len(rows) == len(sampled) else logits[upload([rows], logits.device)[0]]
            sampled_tokens = sample(picked, [r.params for r in reqs], [r.generator for r in reqs])
            _logprobs_to_requests(_logprobs_on_device(picked, sampled_tokens, reqs))
            tokens = sampled_tokens.tolist()
            for i, tok in zip(rows, tokens):
                out[i] = int(tok)
        return out


def _logprobs_on_device(logits: torch.Tensor, tokens: torch.Tensor, reqs: list) -> tuple | None:
    """Queue the logprobs of the requests that asked (None, and no work, when none did)."""
    rows = lp.wanted_rows([r.params for r in reqs])
    if not rows:
        return None
    counts = [reqs[i].params.logprobs for i in rows]
    return [reqs[i] for i in rows], counts, lp.compute(logits, tokens, rows, counts)


def _logprobs_to_requests(queued: tuple | None) -> None:
    """Each asking request's entry joins its pending logprobs, in the order its tokens are appended."""
    if queued is None:
        return
    reqs, counts, parts = queued
    for req, entry in zip(reqs, lp.to_host(parts, counts)):
        req.pending_logprobs.append(entry)


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
