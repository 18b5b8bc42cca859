"""A request inside the engine, and what a step reports about it."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from .sampling import SamplingParams


class Status(enum.Enum):
    WAITING = "waiting"  # queued (new, or preempted and waiting to be recomputed)
    RUNNING = "running"  # holds KV pages and a state slot
    FINISHED = "finished"


FUTURE = -1  # an output token id sampled on the device and not yet read (overlapped steps)


class RequestRejected(ValueError):
    """A request that can never run (empty, or longer than the pool or the context); says why."""


@dataclass
class StepOutput:
    request_id: str
    token_ids: list[int]  # tokens generated this step
    text: str  # text that became final this step
    finished: bool
    finish_reason: str | None  # stop | length | abort | None
    prompt_tokens: int
    completion_tokens: int
    error: str | None = None  # why a request was ended by the engine (not by its own params)
    logprobs: list | None = None  # one logprobs.TokenLogprob per token of token_ids, when the request asked


class Request:
    """Prompt + generated tokens, and the resources the scheduler gave it."""

    def __init__(self, request_id: str, prompt_ids: list[int], params: SamplingParams, arrival: int,
                 generator=None, detokenizer=None):
        self.id = request_id
        self.prompt_ids = list(prompt_ids)
        self.output_ids: list[int] = []
        self.params = params
        self.arrival = arrival  # admission order key: the newest is preempted first
        self.generator = generator
        self.detokenizer = detokenizer
        self.status = Status.WAITING
        self.pages: list[int] = []  # KV pages, in order (the block table)
        # SWA pages (sliding layers, with an SWA pool): one entry per page of the context computed
        # so far, None where the window has moved past the page and it was freed.
        self.swa_pages: list[int | None] = []
        self.state_slot: int | None = None
        self.num_computed = 0  # tokens whose KV / state is in the pools
        self.finish_reason: str | None = None
        self.error: str | None = None
        self.num_preemptions = 0
        self.pending_tokens: list[int] = []  # generated since the last StepOutput
        # The runner's logprobs entries (params.logprobs set), one per sampled token in order; a token the
        # scheduler drops (its request already ended) leaves a surplus entry at the end, never read.
        self.pending_logprobs: list = []
        self.computed_high = 0  # most tokens ever computed (what a preempted request recomputes up to)
        # Overlapped steps (scheduler.launched): its last output is on the device, not yet read, and
        # counts say it is its last (max_new_tokens, the context): no further step is scheduled.
        self.finishing = False
        self.finish_after: tuple[str, str] | None = None  # (reason, error) to end with once that token is read

    @property
    def all_ids(self) -> list[int]:
        return self.prompt_ids + self.output_ids

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_ids) + len(self.output_ids)

    def token_slice(self, start: int, n: int) -> list[int]:
        """n tokens of prompt + output from `start` (what a step feeds the model for this request)."""
        p = len(self.prompt_ids)
        if start >= p:
            return self.output_ids[start - p:start - p + n]
        if start + n <= p:
            return self.prompt_ids[start:start + n]
        return self.prompt_ids[start:] + self.output_ids[:start + n - p]

    @property
    def num_uncomputed(self) -> int:
        return self.num_tokens - self.num_computed

    @property
    def is_finished(self) -> bool:
        return self.status is Status.FINISHED

    def __repr__(self) -> str:
        return (f"Request({self.id}, {self.status.value}, prompt={len(self.prompt_ids)}, out={len(self.output_ids)}, "
                f"computed={self.num_computed}, pages={len(self.pages)}, slot={self.state_slot})")
