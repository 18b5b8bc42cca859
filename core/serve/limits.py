"""How much one HTTP request, and the server as a whole, may ask of the engine.

Defaults come from the pools the engine allocated, so a small CPU server and a large GPU server
both get limits that fit: a request that could never run is refused before it is parsed in full or
queued, and an overloaded server answers 429 with `Retry-After` at once instead of letting the
queue (and every client's time to first token) grow without bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# A body carries prompts as text (~4 bytes a token) or token ids (up to ~8 bytes each: "123456, ");
# 8 bytes a token of queued work is room for either, plus the JSON around it.
BODY_BYTES_PER_TOKEN = 8
MIN_BODY_BYTES = 1 << 20  # 1 MiB: any sensible chat or completion fits
# Parsing JSON holds the interpreter lock (~11 ms per MiB here): the cap bounds that stall.
MAX_DEFAULT_BODY_BYTES = 16 << 20
DEFAULT_DRAIN_GRACE_S = 30.0
# Retry-After bounds (seconds): at least 1 (the header's unit), at most a minute (an estimate from a
# moment's throughput is no promise beyond that).
MIN_RETRY_AFTER_S, MAX_RETRY_AFTER_S = 1, 60
# What a draining server tells clients: another server (or this one, restarted) takes work by then.
DRAIN_RETRY_AFTER_S = 5


class Rejected(Exception):
    """A request the server will not take now (429/503, `retry_after` set) or ever (400/413)."""

    def __init__(self, message: str, status: int, reason: str, retry_after: int | None = None,
                 param: str | None = None):
        super().__init__(message)
        self.message, self.status, self.reason, self.retry_after, self.param = message, status, reason, retry_after, param


@dataclass(frozen=True)
class ServerLimits:
    max_body_bytes: int
    max_prompts: int  # prompts in one HTTP request
    max_queued_requests: int  # engine requests admitted beyond those that can run at once
    max_queued_tokens: int  # tokens of work (prompt + requested new tokens) admitted and unfinished
    max_request_tokens: int | None  # most tokens one request may reach (KV pool), None: no KV pool
    context_len: int | None
    max_running_requests: int
    drain_grace_s: float = DEFAULT_DRAIN_GRACE_S

    @property
    def max_inflight_requests(self) -> int:
        return self.max_running_requests + self.max_queued_requests

    def describe(self) -> str:
        return (f"max_body_bytes={self.max_body_bytes}, max_prompts={self.max_prompts}, "
                f"max_queued_requests={self.max_queued_requests}, max_queued_tokens={self.max_queued_tokens}, "
                f"drain_grace_s={self.drain_grace_s:g}")


def default_limits(info: dict, *, max_body_bytes: int | None = None, max_prompts: int | None = None,
                   max_queued_requests: int | None = None, max_queued_tokens: int | None = None,
                   drain_grace_s: float | None = None) -> ServerLimits:
    """Limits from the engine's `server_info()`; any given value overrides its default."""
    running = int(info.get("max_running_requests") or 1)
    alloc = info.get("allocated") or {}
    kv_tokens = int(alloc.get("kv_tokens") or 0)
    context = info.get("context_len") or None
    uses_kv = bool(info.get("kv_layers", [1])) and kv_tokens > 0
    # The largest request one sequence can reach: the KV pool (minus the page the next token needs).
    request_tokens = kv_tokens - 1 if uses_kv else None
    one = min(x for x in (request_tokens, context, 1 << 20) if x)  # the most work a single request brings
    queued = max_queued_requests if max_queued_requests is not None else max(64, 8 * running)
    # Eight pool-fulls of work admitted: the pool stays busy, and a lone largest request always fits.
    tokens = max_queued_tokens if max_queued_tokens is not None else max(8 * max(kv_tokens, one), one)
    prompts = max_prompts if max_prompts is not None else running + queued
    body = max_body_bytes if max_body_bytes is not None else min(
        max(MIN_BODY_BYTES, BODY_BYTES_PER_TOKEN * tokens), MAX_DEFAULT_BODY_BYTES)
    return ServerLimits(max_body_bytes=body, max_prompts=prompts, max_queued_requests=queued,
                        max_queued_tokens=tokens, max_request_tokens=request_tokens, context_len=context,
                        max_running_requests=running,
                        drain_grace_s=DEFAULT_DRAIN_GRACE_S if drain_grace_s is None else drain_grace_s)


class Admission:
    """Counts what the server has admitted and not yet finished; says 429 beyond the limits.

    Used from the event loop only (admit and release are synchronous), so the check and the count
    cannot race.
    """

    def __init__(self, limits: ServerLimits):
        self.limits = limits
        self.requests = 0
        self.tokens = 0

    def cost(self, prompt_len: int, max_new_tokens: int) -> int:
        total = prompt_len + max_new_tokens
        return min(total, self.limits.context_len) if self.limits.context_len else total

    def check_size(self, n: int, tokens: int) -> None:
        """Refuse (for good) a request bigger than the whole queue: waiting would never help."""
        lim = self.limits
        if n > lim.max_inflight_requests:
            raise Rejected(f"the request holds {n} prompts but the server admits at most {lim.max_inflight_requests} "
                           "at a time; split it into smaller requests", 413, "too_many_prompts")
        if tokens > lim.max_queued_tokens:
            raise Rejected(f"the request asks for {tokens} tokens of work (prompts + max_tokens) but the server "
                           f"admits at most {lim.max_queued_tokens} at a time; split it or lower max_tokens",
                           413, "too_many_tokens")

    def admit(self, n: int, tokens: int, tokens_per_s: float = 0.0) -> None:
        """Count the request in, or refuse it: 413 if it could never fit, 429 while the queue is full,
        with Retry-After from the queue's drain estimate at `tokens_per_s` (prompt + generated tokens
        the engine works through a second, from the metrics)."""
        self.check_size(n, tokens)
        lim = self.limits
        if self.requests and (self.requests + n > lim.max_inflight_requests or self.tokens + tokens > lim.max_queued_tokens):
            wait = self.retry_after(n, tokens, tokens_per_s)
            raise Rejected(f"the server is at capacity ({self.requests} requests, {self.tokens} tokens of work "
                           f"admitted; limits {lim.max_inflight_requests} and {lim.max_queued_tokens}); "
                           f"retry in {wait} s (the Retry-After header)", 429, "queue_full", retry_after=wait)
        self.requests += n
        self.tokens += tokens

    def retry_after(self, n: int, tokens: int, tokens_per_s: float) -> int:
        """Seconds until the queue has room for `n` requests of `tokens` work, at the engine's rate.

        The work that must finish first is the token excess, or, when requests are the limit, the
        excess requests at the mean admitted request's size; whichever is more. With no rate yet
        (a server that just started) the answer is the minimum: nothing says it is slow."""
        lim = self.limits
        excess_tokens = self.tokens + tokens - lim.max_queued_tokens
        excess_requests = self.requests + n - lim.max_inflight_requests
        mean = self.tokens / self.requests if self.requests else 0.0
        work = max(excess_tokens, excess_requests * mean, 0.0)
        if tokens_per_s <= 0 or work <= 0:
            return MIN_RETRY_AFTER_S
        return int(min(max(math.ceil(work / tokens_per_s), MIN_RETRY_AFTER_S), MAX_RETRY_AFTER_S))

    def release(self, n: int, tokens: int) -> None:
        self.requests = max(0, self.requests - n)
        self.tokens = max(0, self.tokens - tokens)
