"""Server-sent events of a streaming response: what each loop turn brought, as few writes as it takes.

A busy server moves thousands of chunks a second through one event loop. Per request, the outputs
that arrived since the stream last looked are joined into one chunk (its tokens and text in order,
its end if it ended), and every event of one turn goes out in one write. The formats encode only
what changes from chunk to chunk (formats.py).
"""

from __future__ import annotations

import asyncio
import json
from typing import AsyncIterator

from .async_engine import EngineFailed, RequestStream
from .formats import Result, coalesce
from .protocol import Work, error_body

DONE = "data: [DONE]\n\n"


async def sse(streams: list[RequestStream], work: Work, fmt) -> AsyncIterator[str]:
    """The response body: the format's events, then `[DONE]` however the stream ends."""
    results = [Result(s.request_id, s.prompt_len) for s in streams]
    try:
        start = "".join(_event(chunk) for chunk in fmt.stream_start(results, work))
        if start:
            yield start
        async for turn in ready_turns(streams):
            events = []
            for index, out in turn:
                res = results[index]
                res.add(out)
                if out.error:
                    events.append(_event(json.dumps(error_body(f"the engine ended the request: {out.error}", 503))))
                events.extend(_event(chunk) for chunk in fmt.stream_chunk(res, index, out, work))
            if events:
                yield "".join(events)
        end = "".join(_event(chunk) for chunk in fmt.stream_end(results, work))
        if end:
            yield end
    except EngineFailed as err:
        yield _event(json.dumps(error_body(str(err), 500)))
    yield DONE


async def ready_turns(streams: list[RequestStream]) -> AsyncIterator[list[tuple[int, object]]]:
    """Per loop turn, (index, one coalesced StepOutput) for each stream that has output, until all
    have finished. Waits only when no stream has anything ready."""
    if len(streams) == 1:
        stream = streams[0]
        while True:
            out = coalesce([await stream.get(), *stream.take_ready()])
            yield [(0, out)]
            if out.finished:
                return
    pending = {asyncio.ensure_future(s.get()): i for i, s in enumerate(streams)}
    try:
        while pending:
            done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            turn = []
            for task in sorted(done, key=pending.__getitem__):  # a stable order: by prompt
                i = pending.pop(task)
                out = coalesce([task.result(), *streams[i].take_ready()])
                turn.append((i, out))
                if not out.finished:
                    pending[asyncio.ensure_future(streams[i].get())] = i
            yield turn
    finally:
        for task in pending:
            task.cancel()


def _event(text: str) -> str:
    # The formats' JSON keeps json's ASCII escapes: clients that split lines like str.splitlines
    # (httpx's iter_lines) cut an event at a raw U+2028 or U+0085 in generated text, which random
    # weights produce.
    return f"data: {text}\n\n"
