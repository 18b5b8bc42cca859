"""The HTTP face of the embedded engine: OpenAI-compatible and SGLang-compatible endpoints.

Routes: `/v1/completions`, `/v1/chat/completions` (both streaming and not), `/v1/models`,
SGLang's `/generate` (token ids or text in, token ids and text out), `/health`, `/server_info`
and Prometheus `/metrics`. Handlers never touch the engine directly: they go through
`AsyncEngine`, which owns it on its own thread. A bad request is answered with a 4xx and a
message before it reaches the engine; a client that disconnects aborts its requests.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
from typing import AsyncIterator

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse

from .api_formats import ChatFormat, CompletionFormat, GenerateFormat, Result
from .api_protocol import BadRequest, Work, chat_work, completion_work, generate_work, parse_body
from .async_engine import AsyncEngine, EngineFailed, RequestStream

log = logging.getLogger("bringup.server")

# Paths served without the API key: liveness must be checkable by anyone on the machine.
OPEN_PATHS = frozenset({"/health", "/ready"})


class ServerState:
    """What the handlers share: the engine, its tokenizer and the fixed facts of this server."""

    def __init__(self, aengine: AsyncEngine, *, model_name: str, tokenizer, vocab_size: int,
                 api_key: str | None = None, info: dict | None = None, context_len: int | None = None):
        self.aengine = aengine
        self.model_name = model_name
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size
        self.api_key = api_key
        self.info = dict(info or {})
        self.context_len = context_len
        self.created = int(time.time())
        self.static_info: dict = {}  # the engine's server_info() at start-up (model path, type...)
        self.ready = False  # set once the warm-up request went through


def error_body(message: str, status: int, param: str | None = None) -> dict:
    kind = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
            405: "invalid_request_error",
            503: "service_unavailable"}.get(status, "server_error")
    return {"object": "error", "error": {"message": message, "type": kind, "param": param, "code": status},
            "message": message}


def create_app(state: ServerState) -> FastAPI:
    app = FastAPI(title="bringup embedded engine", docs_url=None, redoc_url=None, openapi_url=None)
    metrics = state.aengine.metrics

    def error(message: str, status: int = 400, param: str | None = None) -> JSONResponse:
        if 400 <= status < 500:
            metrics.record_bad_request()
        return JSONResponse(error_body(message, status, param), status_code=status)

    if state.api_key:
        app.add_middleware(ApiKeyMiddleware, api_key=state.api_key, on_reject=metrics.record_bad_request)

    async def body_of(request: Request) -> dict:
        return parse_body(await request.body())

    @app.exception_handler(BadRequest)
    async def bad_request(_request: Request, exc: BadRequest):
        return error(exc.message, exc.status, exc.param)

    @app.exception_handler(404)
    async def not_found(request: Request, _exc):
        return error(f"no route {request.method} {request.url.path}; see /v1/models, /v1/completions, "
                     "/v1/chat/completions, /generate, /health, /server_info, /metrics", 404)

    @app.exception_handler(405)
    async def wrong_method(request: Request, _exc):
        return error(f"{request.method} is not allowed on {request.url.path}", 405)

    @app.get("/health")
    async def health():
        if not state.aengine.alive:
            return error("the engine loop has stopped", 503)
        if not state.ready:
            return error("the server is still starting", 503)
        return {"status": "ok"}

    @app.get("/ready")
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
        return {**state.info, **live, "model_name": state.model_name, "ready": state.ready,
                "metrics": metrics.snapshot(), "last_engine_error": state.aengine.error}

    @app.get("/metrics")
    async def prometheus():
        return PlainTextResponse(metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    @app.get("/v1/models")
    async def models():
        card = {"id": state.model_name, "object": "model", "created": state.created, "owned_by": "bringup",
                "root": state.model_name}
        if state.context_len:
            card["max_model_len"] = state.context_len
        return {"object": "list", "data": [card]}

    @app.post("/v1/completions")
    async def completions(request: Request):
        work = completion_work(await body_of(request), state.tokenizer, state.vocab_size)
        return await respond(request, work, CompletionFormat(state.model_name))

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        work = chat_work(await body_of(request), state.tokenizer)
        return await respond(request, work, ChatFormat(state.model_name))

    @app.api_route("/generate", methods=["POST", "PUT"])
    async def generate(request: Request):
        work = generate_work(await body_of(request), state.tokenizer, state.vocab_size)
        return await respond(request, work, GenerateFormat())

    async def submit_all(work: Work) -> list[RequestStream]:
        streams: list[RequestStream] = []
        try:
            rids = work.request_ids or [None] * len(work.prompts)
            for prompt, params, rid in zip(work.prompts, work.params, rids):
                streams.append(await state.aengine.submit(prompt, params, rid))
        except ValueError as err:  # RequestRejected / invalid parameters: the client's to fix
            for s in streams:
                state.aengine.abort(s.request_id)
            raise BadRequest(str(err)) from None
        except BaseException:
            for s in streams:
                state.aengine.abort(s.request_id)
            raise
        return streams

    async def respond(request: Request, work: Work, fmt):
        streams = await submit_all(work)
        if work.stream:
            return StreamingResponse(sse(streams, work, fmt), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        watcher = asyncio.ensure_future(_abort_on_disconnect(request, state.aengine, streams))
        try:
            results = await asyncio.gather(*(_collect(s) for s in streams))
        except EngineFailed as err:
            return error(str(err), 500)
        finally:
            watcher.cancel()
        failed = [r for r in results if r.error]
        if failed:
            return error(f"the engine ended the request: {failed[0].error}", 503)
        return fmt.whole(results, work)

    async def sse(streams: list[RequestStream], work: Work, fmt) -> AsyncIterator[str]:
        results = [Result(s.request_id, s.prompt_len) for s in streams]
        try:
            for chunk in fmt.stream_start(results, work):
                yield _event(chunk)
            async for index, out in _merged(streams):
                res = results[index]
                res.add(out)
                if out.error:
                    yield _event(error_body(f"the engine ended the request: {out.error}", 503))
                for chunk in fmt.stream_chunk(res, index, out, work):
                    yield _event(chunk)
            for chunk in fmt.stream_end(results, work):
                yield _event(chunk)
        except EngineFailed as err:
            yield _event(error_body(str(err), 500))
        finally:
            for s in streams:  # the client went away (or we failed): free its pool space
                if not s.finished:
                    state.aengine.abort(s.request_id)
        yield "data: [DONE]\n\n"

    return app


class ApiKeyMiddleware:
    """Plain ASGI (not BaseHTTPMiddleware), so streaming and disconnects pass through untouched."""

    def __init__(self, app, api_key: str, on_reject=None):
        self.app = app
        self.expected = f"Bearer {api_key}".encode()
        self.on_reject = on_reject

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("path") in OPEN_PATHS:
            return await self.app(scope, receive, send)
        given = dict(scope.get("headers") or []).get(b"authorization", b"")
        if hmac.compare_digest(given, self.expected):
            return await self.app(scope, receive, send)
        if self.on_reject:
            self.on_reject()
        body = json.dumps(error_body("missing or wrong API key; send the header 'Authorization: Bearer <key>' "
                                     "with the key given to --api-key", 401)).encode()
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"www-authenticate", b"Bearer")]})
        await send({"type": "http.response.body", "body": body})


async def _collect(stream: RequestStream) -> Result:
    res = Result(stream.request_id, stream.prompt_len)
    while True:
        out = await stream.get()
        res.add(out)
        if out.finished:
            return res


async def _merged(streams: list[RequestStream]) -> AsyncIterator[tuple[int, object]]:
    """Outputs of several streams as they come: (index, StepOutput), until all have finished."""
    if len(streams) == 1:
        while True:
            out = await streams[0].get()
            yield 0, out
            if out.finished:
                return
    pending = {asyncio.ensure_future(s.get()): i for i, s in enumerate(streams)}
    try:
        while pending:
            done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                i = pending.pop(task)
                out = task.result()
                yield i, out
                if not out.finished:
                    pending[asyncio.ensure_future(streams[i].get())] = i
    finally:
        for task in pending:
            task.cancel()


async def _abort_on_disconnect(request, aengine: AsyncEngine, streams: list[RequestStream]) -> None:
    """For non-streaming answers: wait for the client to hang up, then abort what is unfinished."""
    while True:
        message = await request.receive()
        if message.get("type") == "http.disconnect":
            for s in streams:
                if not s.finished:
                    aengine.abort(s.request_id)
            return


def _event(obj) -> str:
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"
