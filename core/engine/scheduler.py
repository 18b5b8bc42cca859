"""Continuous batching over two pools, with mixed chunked prefill.

Each step carries every running request that decodes (one token each, never held back by prompt
work) plus prompt tokens up to a budget, as SGLang's mixed chunked prefill and vLLM's token budget
do, so no decoding request waits a whole prompt's prefill for its next token. The budget is
`mixed_prefill_size` when a running request decodes this step (kept small: the decodes wait for
the step), `chunked_prefill_size` (the chunk) when none does; both the planner's choice by default
(core/planner/step_budget.py):
1. the running requests, oldest first: a decode token, or, within the budget, the next chunk of a
   long prompt (its state slot carries the Mamba state from chunk to chunk) or of a preempted
   request's recompute;
2. then waiting requests, in order, while the budget lasts and both pools admit them: a free state
   slot (one per request) and KV pages for the whole prompt plus room for the first output token
   (and, when others are running, a small watermark so their decodes do not preempt at once).
The step lists its requests in state-slot order (`order_by_state_slot`), whatever order chose them.

When a running request needs a KV page and none is free, the newest running request is preempted:
its pages and slot are freed and it goes back to the front of the queue, to be recomputed from its
prompt and the tokens it already produced. A prompt that can never fit in the pool is refused when
it is added (`RequestRejected`); a lone request that fills the whole pool ends with "length".

With an SWA pool (sliding-window layers beside full ones), a request also holds SWA pages, but
only those its window still reaches: before each step the pages the window has left are freed
(`swa_evicted_pages` counts them), and pages for the step's new tokens are taken as for KV.

The scheduler only keeps books (no tensors: the model runner owns those). It also owns finishing:
after the runner has run a step, `postprocess` records the computed tokens, appends each sampled
token and ends the request on a stop id or EOS, a stop string, max_new_tokens or the context length.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from .pools import KVPool, StatePool, SWAPool
from .request import FUTURE, Request, RequestRejected, Status


@dataclass
class ScheduledStep:
    requests: list[Request]
    num_new_tokens: list[int]  # per request: tokens computed this step
    preempted: list[Request]

    @property
    def num_tokens(self) -> int:
        return sum(self.num_new_tokens)

    def prefill(self) -> list[tuple[Request, int]]:
        """(request, tokens) of the prefill work in this step (call before it is recorded): a decode
        computes the one output token not yet in the pools; anything else is prefill."""
        return [(r, n) for r, n in zip(self.requests, self.num_new_tokens)
                if not (n == 1 and len(r.prompt_ids) <= r.num_computed == r.num_tokens - 1)]

    def samples(self) -> list[bool]:
        """Which requests reach the end of their known tokens this step (and so get a new token)."""
        return [r.num_computed + n == r.num_tokens for r, n in zip(self.requests, self.num_new_tokens)]


def order_by_state_slot(step: ScheduledStep) -> None:
    """Put the step's requests in state-slot order (requests without a slot first, as they came).
    A decode batch whose slots are then one ascending run has its Mamba states stepped where they
    lie in the pool (kernels/cpu/mamba_decode.py); in admission order, a reused slot breaks the run
    and every layer gathers and scatters all the batch's states (about 6 % of a CPU decode step)."""
    reqs = step.requests
    order = sorted(range(len(reqs)), key=lambda i: -1 if reqs[i].state_slot is None else reqs[i].state_slot)
    if order != list(range(len(reqs))):
        step.requests = [reqs[i] for i in order]
        step.num_new_tokens = [step.num_new_tokens[i] for i in order]


class Scheduler:
    def __init__(self, kv_pool: KVPool, state_pool: StatePool, *, max_running_requests: int,
                 chunked_prefill_size: int | None = 2048, mixed_prefill_size: int | None = None,
                 max_context: int | None = None, watermark: float = 0.01, eos_token_ids=frozenset(),
                 swa_pool: SWAPool | None = None):
        self.kv_pool, self.state_pool = kv_pool, state_pool
        self.swa_pool = swa_pool if swa_pool is not None and swa_pool.layer_ids else None
        self.swa_evicted_pages = 0
        self.uses_kv = len(kv_pool.layer_ids) > 0  # a pure-SSM model has no KV pages to manage
        self.max_running = max(1, min(int(max_running_requests), state_pool.num_slots))
        self.token_budget = int(chunked_prefill_size) if chunked_prefill_size and chunked_prefill_size > 0 else None
        # Prompt tokens beside decodes; None: the same as token_budget (capped at it when both are set).
        self.mixed_budget = int(mixed_prefill_size) if mixed_prefill_size and mixed_prefill_size > 0 else None
        self.max_context = max_context
        self.watermark_pages = max(1, int(kv_pool.num_pages * watermark)) if self.uses_kv else 0
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []  # in admission order
        self.ended: list[Request] = []  # finished outside a forward pass (abort, pool full): to report
        self.num_preemptions = 0
        self.reserved: dict[str, tuple[list[int], list[int]]] = {}  # owner -> (pages, slots)
        self.reserved_swa: dict[str, list[int]] = {}  # owner -> SWA pages (the graphs' padding page)
        self.eos_token_ids = frozenset(eos_token_ids)
        # Token counts for stats(): prompt tokens once, tokens computed again after a preemption, outputs.
        self.totals = {"prompt": 0, "recomputed": 0, "generated": 0}

    # Queue
    def check_fits(self, num_prompt_tokens: int) -> None:
        """Raise RequestRejected for a prompt that no amount of waiting would let run."""
        if num_prompt_tokens < 1:
            raise RequestRejected("the prompt is empty; send at least one token")
        if self.max_context is not None and num_prompt_tokens >= self.max_context:
            raise RequestRejected(
                f"the prompt has {num_prompt_tokens} tokens but the model's context is {self.max_context}; "
                "shorten the prompt"
            )
        if self.uses_kv:
            need = self.kv_pool.pages_for(num_prompt_tokens + 1)
            if need > self.usable_pages:
                raise RequestRejected(
                    f"the prompt has {num_prompt_tokens} tokens and needs {need} KV pages of "
                    f"{self.kv_pool.page_size} tokens, but the KV pool holds only {self.usable_pages} pages "
                    f"({self.usable_pages * self.kv_pool.page_size} tokens); shorten the prompt or give the pool more memory "
                    "(raise --mem-fraction, or lower --max-running-requests)"
                )
        if self.swa_pool is not None:
            first = min(num_prompt_tokens, self.token_budget or num_prompt_tokens)
            need = self.swa_pool.pages_at_most(first)
            usable = self.swa_pool.num_pages - self.num_reserved_swa
            if need > usable:
                raise RequestRejected(
                    f"the prompt's first chunk of {first} tokens and the window of {self.swa_pool.window} need {need} "
                    f"SWA pages of {self.swa_pool.page_size} tokens, but the SWA pool holds only "
                    f"{usable}; lower --chunked-prefill-size or give the pools more memory"
                )

    def add(self, req: Request) -> None:
        self.check_fits(req.num_tokens)
        req.status = Status.WAITING
        self.waiting.append(req)

    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def take_ended(self) -> list[Request]:
        ended, self.ended = self.ended, []
        return ended

    # One step
    def schedule(self) -> ScheduledStep:
        budget = self.prompt_budget(any(map(self._decodes, self.running)))  # prompt tokens
        step = ScheduledStep([], [], [])
        queue = deque(self.running)
        while queue:
            req = queue.popleft()
            if req.finishing:  # its last token is in flight (overlapped steps): nothing more to compute
                continue
            decode = self._decodes(req)
            n = 1 if decode else int(min(req.num_uncomputed, budget))
            if n <= 0:  # prompt work, and the budget is spent: it goes on next step
                continue
            if not self._grow(req, n, queue, step):
                continue
            step.requests.append(req)
            step.num_new_tokens.append(n)
            if not decode:
                budget -= n
        if not step.preempted:  # after a preemption the pool is tight: admit nothing new
            self._admit(step, budget)
        order_by_state_slot(step)
        return step

    def prompt_budget(self, with_decodes: bool) -> float:
        """Prompt tokens a step may carry: the mixed budget beside decodes, else the chunk."""
        full = self.token_budget if self.token_budget is not None else float("inf")
        if with_decodes and self.mixed_budget is not None:
            return min(full, self.mixed_budget)
        return full

    @staticmethod
    def _decodes(req: Request) -> bool:
        """Whether `req` computes one output token this step (its prompt done, its last token new)."""
        return not req.finishing and req.num_uncomputed == 1 and req.num_computed >= len(req.prompt_ids)

    def _grow(self, req: Request, n: int, queue: deque, step: ScheduledStep) -> bool:
        """Give `req` pages for n more tokens, preempting the newest unscheduled requests if needed."""
        if not self.uses_kv:
            return True
        self._evict_window(req)
        need = max(0, self.kv_pool.pages_for(req.num_computed + n) - len(req.pages))
        need_swa = self._swa_need(req, n)
        if not need and not need_swa:  # most decode steps: the pages are there (host time per request)
            return True
        while not self._fits(need, need_swa) and queue:
            self._preempt(queue.pop(), step)
        if self._fits(need, need_swa):
            req.pages += self.kv_pool.alloc(need, owner=req.id)
            self._swa_alloc(req, need_swa)
            return True
        if step.requests:  # older requests hold the pages this step: wait for them
            self._preempt(req, step)
        else:  # alone and the pool is full: it can never grow
            pool = self.kv_pool if need > self.kv_pool.num_free_pages else self.swa_pool
            error = (f"the {pool.name} is full ({pool.capacity_tokens} tokens) with this request alone; "
                     "give the pool more memory or ask for fewer tokens")
            if req.output_ids and req.output_ids[-1] == FUTURE:  # its last token is still on the device:
                req.finishing, req.finish_after = True, ("length", error)  # it ends once that is read
            else:
                self.finish(req, "length", error=error)
        return False

    # SWA pages
    def _fits(self, kv_pages: int, swa_pages: int) -> bool:
        swa_free = self.swa_pool.num_free_pages if self.swa_pool is not None else 0
        return kv_pages <= self.kv_pool.num_free_pages and swa_pages <= swa_free

    def _swa_need(self, req: Request, n: int) -> int:
        if self.swa_pool is None:
            return 0
        return max(0, self.swa_pool.pages_for(req.num_computed + n) - len(req.swa_pages))

    def _swa_alloc(self, req: Request, count: int) -> None:
        if count:
            req.swa_pages += self.swa_pool.alloc(count, owner=req.id)

    def _evict_window(self, req: Request) -> None:
        """Free the SWA pages the request's window has left: no future query sees them."""
        if self.swa_pool is None:
            return
        expired = min(self.swa_pool.expired_pages(req.num_computed), len(req.swa_pages))
        gone = [p for p in req.swa_pages[:expired] if p is not None]
        if gone:
            self.swa_pool.free(gone)
            req.swa_pages[:expired] = [None] * expired
            self.swa_evicted_pages += len(gone)

    def _admit(self, step: ScheduledStep, budget) -> None:
        while self.waiting and budget > 0:
            req = self.waiting[0]
            if len(self.running) >= self.max_running or self.state_pool.num_free_slots == 0:
                return
            if self.uses_kv:
                need = self.kv_pool.pages_for(req.num_tokens + 1)
                if need > self.usable_pages:  # preempted after growing to the whole pool
                    self.finish(req, "length", error=(
                        f"the request grew to {req.num_tokens} tokens, more than the KV pool holds "
                        f"({self.usable_pages * self.kv_pool.page_size}); give the pool more memory or ask for fewer tokens"))
                    continue
                reserve = self.watermark_pages if self.running else 0
                first = int(min(req.num_uncomputed, budget))
                need_swa = self._swa_need(req, first)
                if need + reserve > self.kv_pool.num_free_pages or not self._fits(0, need_swa):
                    return
                req.pages = self.kv_pool.alloc(self.kv_pool.pages_for(req.num_tokens), owner=req.id)
                self._swa_alloc(req, need_swa)
            self.waiting.popleft()
            req.state_slot = self.state_pool.alloc(owner=req.id)
            req.status = Status.RUNNING
            self.running.append(req)
            n = int(min(req.num_uncomputed, budget))
            step.requests.append(req)
            step.num_new_tokens.append(n)
            budget -= n

    def _preempt(self, req: Request, step: ScheduledStep) -> None:
        self._release(req)
        self.running.remove(req)
        req.status = Status.WAITING
        req.num_computed = 0  # recompute prompt + outputs when readmitted
        req.num_preemptions += 1
        self.num_preemptions += 1
        self.waiting.appendleft(req)
        step.preempted.append(req)

    def _release(self, req: Request) -> None:
        if req.pages:
            self.kv_pool.free(req.pages)
            req.pages = []
        if req.swa_pages:
            self.swa_pool.free([p for p in req.swa_pages if p is not None])
            req.swa_pages = []
        if req.state_slot is not None:
            self.state_pool.free(req.state_slot)
            req.state_slot = None

    def finish(self, req: Request, reason: str, error: str | None = None) -> None:
        """End a request (any state) and give its pages and slot back at once."""
        if req.is_finished:
            return
        if req.status is Status.RUNNING:
            self.running.remove(req)
        elif req in self.waiting:
            self.waiting.remove(req)
        self._release(req)
        req.status = Status.FINISHED
        req.finish_reason = reason
        req.error = error
        self.ended.append(req)

    def advance(self, step: ScheduledStep) -> None:
        """Record that the scheduled tokens are now in the pools."""
        for req, n in zip(step.requests, step.num_new_tokens):
            req.num_computed += n

    # After the model ran
    def postprocess(self, step: ScheduledStep, tokens: list[int | None]) -> list[Request]:
        """Record a step the runner has run: its tokens are in the pools, and each sampled token
        (None: a prompt chunk mid-way) is appended and may finish its request. Returns the requests
        that got a token, in step order."""
        for req, n in zip(step.requests, step.num_new_tokens):
            self._count_computed(req, n)
        self.advance(step)
        got = []
        for req, token in zip(step.requests, tokens):
            if token is not None:
                self._append_token(req, int(token))
                got.append(req)
        return got

    # Overlapped steps (the engine's overlap mode): the books move at launch, the tokens come a step later
    def launched(self, step: ScheduledStep, sampled: list[bool]) -> None:
        """Record a step whose forward is queued on the device: its tokens are (will be) in the pools,
        and each sampling request gets a FUTURE placeholder as its next output, which the next step
        reads on the device. A request whose count of outputs (or context) is now full is marked
        `finishing`: it is scheduled no more, and ends when its token is read (`resolve`)."""
        for req, n in zip(step.requests, step.num_new_tokens):
            self._count_computed(req, n)
        self.advance(step)
        for req, s in zip(step.requests, sampled):
            if s:
                req.output_ids.append(FUTURE)
                if len(req.output_ids) >= req.params.max_new_tokens or (
                        self.max_context is not None and req.num_tokens >= self.max_context):
                    req.finishing = True

    def resolve(self, step: ScheduledStep, sampled: list[bool], tokens: list[int]) -> list[Request]:
        """The sampled tokens of a launched step, now read: each replaces its request's first
        placeholder and may finish it (as `postprocess` does); a token that came after its request
        ended (an abort, a stop one step earlier) is dropped, and so are its later placeholders."""
        got = []
        values = iter(tokens)
        for req, s in zip(step.requests, sampled):
            if not s:
                continue
            token = int(next(values))
            if req.is_finished:
                continue
            k = req.output_ids.index(FUTURE)
            req.output_ids[k] = token
            req.pending_tokens.append(token)
            self.totals["generated"] += 1
            got.append(req)
            reason, error = self._stop_reason(req, token, k + 1), None
            if reason is None and req.finish_after is not None:
                reason, error = req.finish_after
            if reason is not None:
                del req.output_ids[k + 1:]  # a placeholder of a step in flight: never a real output
                self.finish(req, reason, error=error)
        return got

    def _stop_reason(self, req: Request, token: int, outputs: int) -> str | None:
        p = req.params
        if token in p.stop_token_ids or (not p.ignore_eos and token in self.eos_token_ids):
            return "stop"
        if req.detokenizer is not None and req.detokenizer.add(token):
            return "stop"
        if outputs >= p.max_new_tokens:
            return "length"
        if self.max_context is not None and len(req.prompt_ids) + outputs >= self.max_context:
            return "length"
        return None

    def _count_computed(self, req: Request, n: int) -> None:
        """Prompt tokens count once; tokens computed again after a preemption count as recomputed."""
        end, high, prompt = req.num_computed + n, req.computed_high, len(req.prompt_ids)
        self.totals["recomputed"] += max(0, min(end, high) - req.num_computed)
        self.totals["prompt"] += max(0, min(end, prompt) - min(high, prompt))
        req.computed_high = max(high, end)

    def _append_token(self, req: Request, token: int) -> None:
        req.output_ids.append(token)
        req.pending_tokens.append(token)
        self.totals["generated"] += 1
        p = req.params
        if token in p.stop_token_ids or (not p.ignore_eos and token in self.eos_token_ids):
            self.finish(req, "stop")
        elif req.detokenizer is not None and req.detokenizer.add(token):
            self.finish(req, "stop")
        elif len(req.output_ids) >= p.max_new_tokens:
            self.finish(req, "length")
        elif self.max_context is not None and req.num_tokens >= self.max_context:
            self.finish(req, "length")

    # Integrity and usage
    def swa_owners(self) -> dict:
        held = {r.id: [p for p in r.swa_pages if p is not None] for r in self.running}
        held.update(self.reserved_swa)
        return {who: pages for who, pages in held.items() if pages}

    def owners(self) -> tuple[dict, dict]:
        pages = {r.id: r.pages for r in self.running if r.pages}
        slots = {r.id: [r.state_slot] for r in self.running if r.state_slot is not None}
        for owner, (held_pages, held_slots) in self.reserved.items():  # e.g. CUDA-graph padding
            if held_pages:
                pages[owner] = held_pages
            if held_slots:
                slots[owner] = held_slots
        return pages, slots

    def reserve(self, owner: str, num_pages: int, num_slots: int) -> tuple[list[int], list[int]]:
        """Take pages and slots out of circulation for good (no request gets them); check() knows them."""
        pages = self.kv_pool.alloc(num_pages, owner=owner) if num_pages else []
        slots = [self.state_pool.alloc(owner=owner) for _ in range(num_slots)]
        self.reserved[owner] = (pages, slots)
        return pages, slots

    def reserve_swa(self, owner: str, num_pages: int) -> list[int]:
        """Take SWA pages out of circulation for good, as `reserve` does KV pages."""
        pages = self.swa_pool.alloc(num_pages, owner=owner) if num_pages and self.swa_pool is not None else []
        self.reserved_swa[owner] = pages
        return pages

    @property
    def num_reserved_swa(self) -> int:
        return sum(len(p) for p in self.reserved_swa.values())

    def check(self) -> None:
        pages, slots = self.owners()
        self.kv_pool.check(pages)
        self.state_pool.check(slots)
        if self.swa_pool is not None:
            self.swa_pool.check(self.swa_owners())

    @property
    def usable_pages(self) -> int:
        """KV pages requests can get: the pool's less the reserved ones."""
        return self.kv_pool.num_pages - self.num_reserved[0]

    @property
    def num_reserved(self) -> tuple[int, int]:
        """(pages, slots) taken out of circulation for good, e.g. the decode graphs' padding."""
        return (sum(len(p) for p, _ in self.reserved.values()), sum(len(s) for _, s in self.reserved.values()))

    @property
    def kv_tokens_used(self) -> int:
        """Tokens the requests hold (reserved pages are beyond the plan and never counted)."""
        return (self.kv_pool.num_used_pages - self.num_reserved[0]) * self.kv_pool.page_size

    @property
    def swa_tokens_used(self) -> int:
        if self.swa_pool is None:
            return 0
        return (self.swa_pool.num_used_pages - self.num_reserved_swa) * self.swa_pool.page_size

