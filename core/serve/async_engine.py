"""The engine loop thread and the asyncio side of the server.

`Engine` is single-threaded: one thread (the loop) owns it and is the only one that calls it.
HTTP handlers hand it work through a command queue (add, abort, or any call such as
`server_info`), each with a future for the answer, and read their request's outputs from an
asyncio queue that the loop fills after every step. A client that goes away aborts its request,
which frees its KV pages and state slot at the next step.

The loop thread does only the engine's work: after a step it hands all of that step's outputs to
each event loop in ONE call (not one wake-up per request), and the text of a request's tokens is
decoded there, on the event loop, while the engine runs its next step (the engine decodes only the
requests with stop strings, whose end depends on the text).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import logging
import queue
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from .engine_protocol import SteppingEngine
from .metrics import EngineMetrics

log = logging.getLogger("bringup.engine")

# How often an idle loop refreshes the pool gauges (seconds).
IDLE_TICK_S = 0.25


class EngineFailed(RuntimeError):
    """The engine raised inside a step; the requests that were in it end with this error."""


@dataclass
class RequestTimes:
    arrival: float
    first_token: float | None = None
    last_token: float | None = None


@dataclass
class RequestStream:
    """What one request's handler reads: StepOutputs in order, ending with a finished one."""

    request_id: str
    prompt_len: int
    queue: asyncio.Queue = field(default_factory=asyncio.Queue)
    finished: bool = False
    detokenizer: Any = None  # IncrementalDetokenizer run on the event loop; None: the engine's text is used

    async def get(self):
        out = await self.queue.get()
        if isinstance(out, BaseException):
            raise out
        if out.finished:
            self.finished = True
        return out

    def take_ready(self) -> list:
        """The outputs already queued (none after the finished one), without waiting: a stream
        sends what one loop turn brought as one chunk. An error waits for the next `get`."""
        ready = []
        while not self.finished and not self.queue.empty():
            out = self.queue.get_nowait()
            if isinstance(out, BaseException):
                self.queue.put_nowait(out)  # nothing after an error: it is raised by the next get
                break
            self.finished = out.finished
            ready.append(out)
        return ready


class AsyncEngine:
    """Runs `engine.step()` in a thread while work exists; fans outputs out to asyncio queues."""

    def __init__(self, engine: SteppingEngine, metrics: EngineMetrics):
        self.engine = engine
        self.metrics = metrics
        self._commands: queue.Queue = queue.Queue()
        self._streams: dict[str, tuple[RequestStream, asyncio.AbstractEventLoop]] = {}
        self._times: dict[str, RequestTimes] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._totals = self._token_totals(engine.stats())
        self.error: str | None = None  # the last step failure, for /health
        self._abort_reasons: dict[str, str] = {}  # request id -> why the server aborted it (draining)
        self._between_steps = getattr(engine, "between_steps", None)  # optional: Engine has it, doubles need not

    # ---- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="engine-loop", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._commands.put(None)  # wake the loop
        if self._thread is not None:
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # ---- asyncio side (called from the event loop) ------------------------------------------

    async def call(self, fn: Callable[[], Any]) -> Any:
        """Run `fn` on the loop thread between steps and return its result (or raise its error)."""
        fut: concurrent.futures.Future = concurrent.futures.Future()
        self._commands.put((fn, fut))
        return await asyncio.wrap_future(fut)

    async def submit(self, prompt_ids: list[int], params, request_id: str | None = None) -> RequestStream:
        """Queue a request in the engine; raises the engine's own error (RequestRejected...) if it refuses."""
        return (await self.submit_many([prompt_ids], [params], [request_id]))[0]

    async def submit_many(self, prompts: list[list[int]], params: list, request_ids: list | None = None
                          ) -> list[RequestStream]:
        """Queue several requests in one command (one engine step, however many prompts).

        All or none: if the engine refuses one, those already added are aborted and its error is
        raised. If the caller is cancelled (the client left) while waiting, all are aborted.
        """
        from bringup.core.engine.detokenize import IncrementalDetokenizer

        rids = [r or uuid.uuid4().hex for r in (request_ids or [None] * len(prompts))]
        tokenizer = getattr(self.engine, "tokenizer", None)
        streams = [RequestStream(rid, len(p), detokenizer=None if sp.stop or tokenizer is None
                                 else IncrementalDetokenizer(tokenizer, p))
                   for rid, p, sp in zip(rids, prompts, params)]
        loop = asyncio.get_running_loop()

        def add():
            added = []
            try:
                for prompt, sp, stream in zip(prompts, params, streams):
                    # Text here only for stop strings (the engine must see them); else the event loop decodes.
                    self.engine.add_request(prompt, sp, request_id=stream.request_id,
                                            detokenize=stream.detokenizer is None)
                    added.append(stream.request_id)
            except BaseException:
                for rid in added:
                    self.engine.abort(rid)  # still queued: never reaches a step
                raise
            now = time.monotonic()
            for stream in streams:
                self._streams[stream.request_id] = (stream, loop)
                self._times[stream.request_id] = RequestTimes(arrival=now)
                self.metrics.record_request_start()

        try:
            await self.call(add)
        except asyncio.CancelledError:  # the client left while we queued them
            self.abort_many(rids)
            raise
        return streams

    def abort(self, request_id: str, reason: str | None = None) -> None:
        """Abort a request (client gone). Safe to call from any thread, any number of times."""
        self.abort_many([request_id], reason)

    def abort_many(self, request_ids: list[str], reason: str | None = None) -> None:
        """Abort requests in one command, queued or running; `reason` becomes their output's error."""
        ids = list(request_ids)

        def do_abort():
            for rid in ids:
                if rid in self._streams:
                    if reason:
                        self._abort_reasons[rid] = reason
                    self.engine.abort(rid)

        self._commands.put((do_abort, None))

    def abort_unstarted(self, reason: str) -> None:
        """End every request that has not produced a token yet (draining: they would start now)."""

        def do_abort():
            for rid, times in list(self._times.items()):
                if times.first_token is None and rid in self._streams:
                    self._abort_reasons[rid] = reason
                    self.engine.abort(rid)

        self._commands.put((do_abort, None))

    def abort_all(self, reason: str) -> None:
        """End every request this loop serves, each with `reason` as its error."""

        def do_abort():
            for rid in list(self._streams):
                self._abort_reasons[rid] = reason
                self.engine.abort(rid)

        self._commands.put((do_abort, None))

    @property
    def num_unfinished(self) -> int:
        return len(self._streams)

    # ---- the loop thread ----------------------------------------------------------------------

    def _run_commands(self, block: bool) -> None:
        timeout = IDLE_TICK_S if block else None
        while True:
            try:
                item = self._commands.get(block=block, timeout=timeout) if block else self._commands.get_nowait()
            except queue.Empty:
                return
            block = False  # after the first, take only what is already there
            if item is None:
                continue
            fn, fut = item
            # A caller that gave up while its command waited (a client gone during submit) has cancelled
            # the future: the command is skipped (nothing added, so nothing to abort). Once marked
            # running, a future cannot be cancelled, so answering it cannot raise InvalidStateError,
            # which would end this thread and leave every request frozen in the pools.
            if fut is not None and not fut.set_running_or_notify_cancel():
                continue
            try:
                result = fn()
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                if fut is not None:
                    fut.set_exception(exc)
                else:
                    log.warning("engine command failed: %s", exc)
            else:
                if fut is not None:
                    fut.set_result(result)

    def _run(self) -> None:
        while not self._stop.is_set():
            busy = self.engine.has_unfinished()
            self._run_commands(block=not busy)
            if not self.engine.has_unfinished():
                if self._between_steps is not None:  # (an idle engine's work: the CPU's compiled step switched in)
                    self._between_steps()
                self.metrics.record_pools(self.engine.stats())
                continue
            start = time.monotonic()
            try:
                outputs = self.engine.step()
            except Exception as exc:  # noqa: BLE001 - an engine bug must not kill the server
                self._fail_all(exc)
                continue
            end = time.monotonic()
            stats = self.engine.stats()
            totals = self._token_totals(stats)
            self.metrics.record_step(start, end, max(totals[0] - self._totals[0], 0), max(totals[1] - self._totals[1], 0))
            self._totals = totals
            self.metrics.record_pools(stats)
            self._hand_out([self._deliver(out, end) for out in outputs])

    def _hand_out(self, deliveries) -> None:
        """A step's outputs to their event loops: one call per loop, whatever the number of requests."""
        by_loop: dict = {}
        for entry in deliveries:
            if entry is not None:
                by_loop.setdefault(entry[1], []).append((entry[0], entry[2]))
        for loop, items in by_loop.items():
            try:
                loop.call_soon_threadsafe(_put_all, items)
            except RuntimeError:  # the event loop is closed (shutting down)
                pass

    def _deliver(self, out, now: float):
        """Record a step output's times; (stream, loop, output) for the hand-out, or None (stream gone)."""
        entry = self._streams.get(out.request_id)
        times = self._times.get(out.request_id)
        if times is not None and out.token_ids:
            if times.first_token is None:
                self.metrics.record_first_token(now - times.arrival)
                times.first_token = now
                extra = len(out.token_ids) - 1
            else:
                extra = len(out.token_ids)
            if extra > 0 and times.last_token is not None:
                self.metrics.record_inter_token(now - times.last_token, extra)
            times.last_token = now
        if out.finished:
            self._streams.pop(out.request_id, None)
            self._times.pop(out.request_id, None)
            reason = self._abort_reasons.pop(out.request_id, None)
            if reason and out.finish_reason == "abort" and not out.error:
                out = dataclasses.replace(out, error=reason)
            if times is not None:
                self.metrics.record_request_end(out.finish_reason, now - times.arrival)
        if entry is None:
            return None
        stream, loop = entry
        return stream, loop, out

    def _fail_all(self, exc: Exception) -> None:
        """The step raised: end every request we know with the error, abort them in the engine."""
        text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        self.error = text
        log.error("engine step failed; ending %d request(s):\n%s", len(self._streams), traceback.format_exc())
        for rid, (stream, loop) in list(self._streams.items()):
            try:
                self.engine.abort(rid)
            except Exception:  # noqa: BLE001
                pass
            _put(loop, stream.queue, EngineFailed(f"the engine failed during a step: {text}"))
        self._streams.clear()
        self._times.clear()
        self._abort_reasons.clear()
        # Drain the aborts so the pools are released before the next request comes in.
        try:
            while self.engine.has_unfinished():
                self.engine.step()
        except Exception:  # noqa: BLE001
            log.error("engine could not drain after a failure:\n%s", traceback.format_exc())

    @staticmethod
    def _token_totals(stats: dict) -> tuple[int, int]:
        """(prompt tokens computed, tokens generated) so far, from `Engine.stats()`."""
        prompt = stats.get("prompt_tokens_total", stats.get("total_prompt_tokens", 0))
        gen = stats.get("generated_tokens_total", stats.get("total_generated_tokens", 0))
        return int(prompt or 0), int(gen or 0)


def _put_all(items) -> None:
    """On the event loop: decode each output's text where the stream decodes its own, then queue it."""
    for stream, out in items:
        det = stream.detokenizer
        if det is not None:
            for token in out.token_ids:
                det.add(token)
            out = dataclasses.replace(out, text=det.take(final=out.finished))
        stream.queue.put_nowait(out)


def _put(loop: asyncio.AbstractEventLoop, q: asyncio.Queue, item) -> None:
    try:
        loop.call_soon_threadsafe(q.put_nowait, item)
    except RuntimeError:  # the event loop is closed (shutting down)
        pass
