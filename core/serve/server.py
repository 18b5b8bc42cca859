"""The HTTP face of the embedded engine: OpenAI-compatible and SGLang-compatible endpoints.

Routes: `/v1/completions`, `/v1/chat/completions` (both streaming and not), `/v1/models`,
SGLang's `/generate` (token ids or text in, token ids and text out), `/health`, `/server_info`,
Prometheus `/metrics` and `/openapi.json`. Handlers never touch the engine directly: they go
through `AsyncEngine`, which owns it on its own thread.

The event loop only moves bytes: a body is read up to a size limit, then parsed and tokenised in
a worker thread, so `/health` and every stream keep answering while a big request is prepared.
A request is checked (fields, pools, admission) before it reaches the engine; all its prompts
are queued in one command; and the client is watched from the first byte: when it goes, its
queued and running prompts are aborted at once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import ctypes
import logging
import os
import time
from dataclasses import replace
from typing import AsyncIterator, Callable

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.requests import ClientDisconnect

from bringup.core.client.engine_records import HEALTH_PID_HEADER

from .access import AccessGuard
from .formats import ChatFormat, CompletionFormat, GenerateFormat, Result
from .limits import DRAIN_RETRY_AFTER_S, Admission, Rejected, ServerLimits, default_limits
from .protocol import (BadRequest, ParseContext, Work, chat_work, completion_work, error_body, generate_work,
                       max_token_bytes, parse_body)
from .schema import openapi_bodies
from .streaming import sse
from .async_engine import AsyncEngine, EngineFailed, RequestStream

log = logging.getLogger("bringup.server")
BIG_BODY_BYTES = 256 << 10  # above this a body is parsed in its own worker (and memory trimmed after)

__all__ = ["ServerState", "create_app", "error_body"]


class ServerState:
    """What the handlers share: the engine, its tokenizer and the fixed facts of this server."""

    def __init__(self, aengine: AsyncEngine, *, model_name: str, tokenizer, vocab_size: int,
                 api_key: str | None = None, info: dict | None = None, context_len: int | None = None,
                 limits: ServerLimits | None = None, model_aliases: tuple[str, ...] = (),
                 host_names: frozenset[str] | None = None):
        self.aengine = aengine
        self.model_name = model_name
        self.model_names = (model_name, *[a for a in model_aliases if a != model_name])
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size
        self.api_key = api_key
        self.info = dict(info or {})
        self.context_len = context_len
        self.limits = limits or default_limits({"context_len": context_len})
        self.admission = Admission(self.limits)
        self.host_names = host_names
        self.max_token_bytes = max_token_bytes(tokenizer)  # read once: the vocabulary does not change
        self.created = int(time.time())
        self.static_info: dict = {}  # the engine's server_info() at start-up (model path, type...)
        self.ready = False  # set once the warm-up request went through
        self.draining = False  # set on SIGTERM/SIGINT: no new work is admitted
        # Parsing and tokenising leave the event loop: ordinary bodies in one worker, big ones in another,
        # so a body of megabytes never makes a chat wait behind it (both only read the tokenizer).
        self.parser = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="parse")
        self.big_parser = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="parse-big")

    def parser_for(self, size: int) -> concurrent.futures.Executor:
        return self.big_parser if size > BIG_BODY_BYTES else self.parser

    def shutdown(self) -> None:
        for pool in (self.parser, self.big_parser):
            pool.shutdown(wait=False, cancel_futures=True)

    def context(self) -> ParseContext:
        lim = self.limits
        return ParseContext(self.tokenizer, self.vocab_size, lim.max_prompts, self.model_names,
                            context_len=lim.context_len, max_queued_tokens=lim.max_queued_tokens,
                            max_token_bytes=self.max_token_bytes)


DRAINING_HEADERS = {"Retry-After": str(DRAIN_RETRY_AFTER_S)}


def draining() -> Rejected:
    return Rejected("the server is shutting down; send the request to another server", 503, "draining",
                    retry_after=DRAIN_RETRY_AFTER_S)


class ClientGone(Exception):
    """The client hung up; nothing more is sent to it."""


def create_app(state: ServerState) -> FastAPI:
    app = FastAPI(title="bringup embedded engine", version="0.1.0", docs_url=None, redoc_url=None,
                  openapi_url="/openapi.json")
    metrics = state.aengine.metrics
    bodies = openapi_bodies()

    def error(message: str, status: int = 400, param: str | None = None, headers: dict | None = None) -> JSONResponse:
        if 400 <= status < 500:
            metrics.record_bad_request()
        return JSONResponse(error_body(message, status, param), status_code=status, headers=headers)

    def refused(exc: Rejected) -> JSONResponse:
        metrics.record_rejection(exc.reason)  # counted here, not as a bad request
        headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after is not None else None
        return JSONResponse(error_body(exc.message, exc.status, exc.param), status_code=exc.status, headers=headers)

    app.add_middleware(AccessGuard, api_key=state.api_key, host_names=state.host_names,
                       on_reject=metrics.record_bad_request)

    @app.exception_handler(BadRequest)
    async def bad_request(_request: Request, exc: BadRequest):
        return error(exc.message, exc.status, exc.param)

    @app.exception_handler(404)
    async def not_found(request: Request, _exc):
        return error(f"no route {request.method} {request.url.path}; see /v1/models, /v1/completions, "
                     "/v1/chat/completions, /generate, /health, /server_info, /metrics, /openapi.json", 404)

    @app.exception_handler(405)
    async def wrong_method(request: Request, _exc):
        return error(f"{request.method} is not allowed on {request.url.path}", 405)

    @app.api_route("/health", methods=["GET", "HEAD"])
    async def health():
        if not state.aengine.alive:
            answer = error("the engine loop has stopped", 503)
        elif state.draining:
            answer = error("the server is shutting down", 503, headers=DRAINING_HEADERS)
        elif not state.ready:
            answer = error("the server is still starting", 503)
        else:
            answer = JSONResponse({"status": "ok"})
        # Names this process: a later window proves an engine record against it (core/client/engine_records.py).
        answer.headers[HEALTH_PID_HEADER] = str(os.getpid())
        return answer

    @app.api_route("/ready", methods=["GET", "HEAD"])
    async def ready():  # SGLang's cheap readiness probe
        return await health()

    @app.get("/model_info")
    @app.get("/get_model_info")
    async def model_info():
        info = state.static_info
        return {"model_path": info.get("model_path"), "served_model_name": state.model_name,
                "tokenizer_path": info.get("model_path"), "is_generation": True,
                "model_type": info.get("model_type"), "architectures": [info.get("architecture")]}

    @app.get("/server_info")
    @app.get("/get_server_info")
    async def server_info():
        engine = state.aengine.engine

        def read():
            try:
                engine.check_pools()
                pools = "ok"
            except Exception as err:  # noqa: BLE001 - reported, not raised
                pools = f"{type(err).__name__}: {err}"
            return {**engine.server_info(), "stats": engine.stats(), "pools_check": pools}

        live = await state.aengine.call(read)
        admitted = {"requests": state.admission.requests, "tokens": state.admission.tokens}
        return {**state.info, **live, "model_name": state.model_name, "ready": state.ready,
                "draining": state.draining, "limits": vars(state.limits), "admitted": admitted,
                "metrics": metrics.snapshot(), "last_engine_error": state.aengine.error}

    @app.get("/metrics")
    async def prometheus():
        return Response(metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    @app.get("/v1/models")
    async def models():
        card = {"id": state.model_name, "object": "model", "created": state.created, "owned_by": "bringup",
                "root": state.model_name}
        if state.context_len:
            card["max_model_len"] = state.context_len
        return {"object": "list", "data": [card]}

    @app.post("/v1/completions", openapi_extra=bodies["completions"])
    async def completions(request: Request):
        return await handle(request, completion_work, CompletionFormat(state.model_name, state.tokenizer))

    @app.post("/v1/chat/completions", openapi_extra=bodies["chat"])
    async def chat(request: Request):
        return await handle(request, chat_work, ChatFormat(state.model_name, state.tokenizer))

    @app.api_route("/generate", methods=["POST", "PUT"], openapi_extra=bodies["generate"])
    async def generate(request: Request):
        return await handle(request, generate_work, GenerateFormat())

    # ---- one generation request, from the first byte to the last -----------------------------------

    async def handle(request: Request, build: Callable, fmt) -> Response:
        if state.draining:
            return refused(draining())
        _check_content_type(request)
        try:
            raw = await read_body(request, state.limits.max_body_bytes)
        except ClientDisconnect:
            return Response(status_code=499)  # nobody reads it
        watch = ClientWatch(request)
        ticket: Ticket | None = None
        try:
            ctx = state.context()
            pool = state.parser_for(len(raw))
            try:
                work = await watch.race(asyncio.wrap_future(pool.submit(prepare, raw, build, ctx, state.limits)))
            finally:
                if len(raw) > BIG_BODY_BYTES:  # give the parse's garbage back to the system (glibc keeps it)
                    with contextlib.suppress(RuntimeError):  # the pool is shut down: the server is exiting
                        pool.submit(trim_memory)
            del raw
            costs = [state.admission.cost(len(p), sp.max_new_tokens) for p, sp in zip(work.prompts, work.params)]
            if state.draining:
                raise draining()
            state.admission.admit(len(costs), sum(costs), sum(metrics.throughput()))
            ticket = Ticket(state, len(costs), sum(costs))
            streams = await watch.race(submit(work))
            ticket.streams = streams
            watch.on_gone(ticket.abort_unfinished)
            if work.stream:
                watch.close()  # the streaming response watches from here on
                response = EngineStream(sse(streams, work, fmt), ticket.close)
                ticket = None  # the response owns it now
                return response
            results = await watch.race(asyncio.gather(*(_collect(s) for s in streams)))
        except Rejected as exc:
            return refused(exc)
        except ClientGone:
            return Response(status_code=499)
        except EngineFailed as err:
            return error(str(err), 500)
        finally:
            watch.close()
            if ticket is not None:
                ticket.close()
        failed = [r for r in results if r.error]
        if failed:  # a drain's end of it says when to come back, as its refusals do
            return error(f"the engine ended the request: {failed[0].error}", 503,
                         headers=DRAINING_HEADERS if state.draining else None)
        return JSONResponse(fmt.whole(results, work))

    async def submit(work: Work) -> list[RequestStream]:
        try:
            return await state.aengine.submit_many(work.prompts, work.params, work.request_ids)
        except ValueError as err:  # RequestRejected / invalid parameters: the client's to fix
            raise BadRequest(str(err)) from None

    return app


def _check_content_type(request: Request) -> None:
    kind = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if kind != "application/json" and not (kind.startswith("application/") and kind.endswith("+json")):
        raise BadRequest(f"the body must be sent as Content-Type: application/json (got {kind or 'none'!r})",
                         status=415)


async def read_body(request: Request, limit: int) -> bytes:
    """The body, refused with 413 as soon as it passes `limit` bytes (or says it will)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BadRequest(f"the body has {int(declared)} bytes; this server takes at most {limit} "
                         "(--max-body-bytes)", status=413)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BadRequest(f"the body is over {limit} bytes, the most this server takes (--max-body-bytes)",
                             status=413)
        chunks.append(chunk)
    return b"".join(chunks)


def trim_memory() -> None:
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to trim
        pass


def prepare(raw: bytes, build: Callable, ctx: ParseContext, limits: ServerLimits) -> Work:
    """In the parse worker: JSON -> checked Work whose every prompt fits the pools.

    The checks come in the documented order: the body's shape (400) and prompt count (413) while
    it is read, then the request's size against the queue (413), then each prompt against the
    context and the KV pool (400)."""
    work = build(parse_body(raw), ctx)
    check_work_size(work, limits)
    fit_to_pool(work, limits)
    return work


def check_work_size(work: Work, limits: ServerLimits) -> None:
    """413 for a request bigger than the whole queue. Each prompt counts only up to what one request
    can reach: fit_to_pool trims a default max_tokens there and names a given one that is too big."""
    admission = Admission(limits)
    cap = limits.max_request_tokens or (1 << 62)
    costs = [min(admission.cost(len(p), sp.max_new_tokens), cap) for p, sp in zip(work.prompts, work.params)]
    admission.check_size(len(costs), sum(costs))


def fit_to_pool(work: Work, limits: ServerLimits) -> None:
    """Refuse a request that would outgrow the KV pool (it would fail after generating); a default
    max_tokens is trimmed to what fits instead."""
    cap = limits.max_request_tokens
    for i, (prompt, sp) in enumerate(zip(work.prompts, work.params)):
        where = f"prompt {i} has" if work.batch else "the prompt has"
        if limits.context_len and len(prompt) >= limits.context_len:
            raise BadRequest(f"{where} {len(prompt)} tokens but the model's context is {limits.context_len}; "
                             "shorten the prompt", param="prompt")
        if cap is None:
            continue
        reach = len(prompt) + sp.max_new_tokens
        if limits.context_len:
            reach = min(reach, limits.context_len)
        if reach <= cap:
            continue
        room = cap - len(prompt)
        if work.max_tokens_given or room < 1:
            raise BadRequest(f"{where} {len(prompt)} tokens and asks for up to {sp.max_new_tokens} more, but the KV "
                             f"pool holds {cap} tokens for one request; lower max_tokens to at most {max(room, 0)} "
                             "or shorten the prompt", param="max_tokens")
        work.params[i] = replace(sp, max_new_tokens=room)


class Ticket:
    """One admitted request: its engine streams and its share of the admission count."""

    def __init__(self, state: ServerState, n: int, tokens: int):
        self.state, self.n, self.tokens = state, n, tokens
        self.streams: list[RequestStream] = []
        self.closed = False

    def abort_unfinished(self) -> None:
        ids = [s.request_id for s in self.streams if not s.finished]
        if ids:
            self.state.aengine.abort_many(ids)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.abort_unfinished()
            self.state.admission.release(self.n, self.tokens)


class EngineStream(StreamingResponse):
    """A server-sent event stream that frees its engine requests however it ends (done, client
    gone before the first event, or cancelled at shutdown)."""

    def __init__(self, events: AsyncIterator[str], on_close: Callable[[], None]):
        super().__init__(events, media_type="text/event-stream",
                         headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        self.on_close = on_close

    async def __call__(self, scope, receive, send) -> None:
        try:
            await super().__call__(scope, receive, send)
        except OSError:  # the socket broke mid-write: the client is gone
            pass
        finally:
            self.on_close()


class ClientWatch:
    """Watches one request's connection once its body is read; `race` gives up when the client goes."""

    def __init__(self, request: Request):
        self.gone = asyncio.Event()
        self.callbacks: list[Callable[[], None]] = []
        self.task = asyncio.ensure_future(self._watch(request.receive))

    async def _watch(self, receive) -> None:
        while True:
            message = await receive()
            if message.get("type") == "http.disconnect":
                self.gone.set()
                for cb in self.callbacks:
                    cb()
                return

    def on_gone(self, cb: Callable[[], None]) -> None:
        self.callbacks.append(cb)
        if self.gone.is_set():
            cb()

    async def race(self, awaitable):
        """The awaitable's result, or ClientGone (the awaitable cancelled) if the client leaves first."""
        if self.gone.is_set():
            if asyncio.isfuture(awaitable) or asyncio.iscoroutine(awaitable):
                asyncio.ensure_future(awaitable).cancel()
            raise ClientGone
        fut = asyncio.ensure_future(awaitable)
        gone = asyncio.ensure_future(self.gone.wait())
        try:
            await asyncio.wait({fut, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
        if fut.done():
            return fut.result()
        fut.cancel()
        try:
            await fut  # let it clean up (a submit aborts what it queued)
        except BaseException:  # noqa: BLE001 - cancelled on purpose
            pass
        raise ClientGone

    def close(self) -> None:
        self.task.cancel()


async def _collect(stream: RequestStream) -> Result:
    res = Result(stream.request_id, stream.prompt_len)
    while True:
        out = await stream.get()
        res.add(out)
        if out.finished:
            return res
