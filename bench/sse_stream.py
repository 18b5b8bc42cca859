"""Streaming cost on the event loop: tokens per second a server's streams deliver, batched vs per token.

No model: a producer thread plays the engine loop (one StepOutput per running request per step,
handed to the event loop with call_soon_threadsafe, as core/serve/async_engine.py does), and each
stream is the server's own response (`EngineStream` over `streaming.sse`, through starlette's
StreamingResponse into an ASGI `send` that keeps the bytes). The baseline in the same run is the
path this replaced: one event per output, each chunk's whole frame re-encoded with json.dumps, one
write per event (reimplemented here, since the server no longer has it).

    python bench/sse_stream.py                       # 64 streams x 1500 tokens, engine as fast as it goes
    python bench/sse_stream.py --streams 256 --tokens 500 --step-ms 2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
import time

from bringup.core.engine.request import StepOutput
from bringup.core.serve.async_engine import RequestStream, _put
from bringup.core.serve.formats import CompletionFormat, Result
from bringup.core.serve.protocol import Work
from bringup.core.serve.server import EngineStream
from bringup.core.serve.streaming import DONE, sse


async def per_token_sse(streams, work, fmt):
    """The pre-batching stream: every output its own event and write, the frame dict re-encoded each time."""
    results = [Result(s.request_id, s.prompt_len) for s in streams]
    pending = {asyncio.ensure_future(s.get()): i for i, s in enumerate(streams)}
    while pending:
        done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            i = pending.pop(task)
            out = task.result()
            results[i].add(out)
            if out.text or out.finished:
                frame = {"id": fmt.id, "object": fmt.object, "created": fmt.created, "model": fmt.model,
                         "choices": [{"index": i, "text": out.text, "logprobs": None,
                                      "finish_reason": out.finish_reason if out.finished else None}]}
                yield f"data: {json.dumps(frame)}\n\n"
            if not out.finished:
                pending[asyncio.ensure_future(streams[i].get())] = i
    yield DONE


def produce(loop, streams: list[RequestStream], tokens: int, step_s: float) -> None:
    """The engine loop's side: a step gives every stream one token (a short word)."""
    for step in range(tokens):
        last = step == tokens - 1
        for s in streams:
            _put(loop, s.queue, StepOutput(s.request_id, [1000 + step % 7], " tok", last,
                                           "length" if last else None, 16, step + 1))
        if step_s:
            time.sleep(step_s)


async def run(mode: str, n: int, tokens: int, step_s: float) -> dict:
    loop = asyncio.get_running_loop()
    writes, size = [0], [0]

    async def send(message):
        if message["type"] == "http.response.body":
            writes[0] += 1
            size[0] += len(message.get("body", b""))

    async def receive():
        await asyncio.Event().wait()  # the client never leaves

    scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"}, "method": "POST", "headers": []}
    responses = []
    for k in range(n):
        stream = RequestStream(f"r{k}", 16)
        work = Work([[1]], [None], False, True)
        fmt = CompletionFormat("m")
        body = sse([stream], work, fmt) if mode == "batched" else per_token_sse([stream], work, fmt)
        responses.append((stream, EngineStream(body, lambda: None)))
    t0 = time.perf_counter()
    tasks = [asyncio.ensure_future(r(scope, receive, send)) for _, r in responses]
    producer = threading.Thread(target=produce, args=(loop, [s for s, _ in responses], tokens, step_s))
    producer.start()
    await asyncio.gather(*tasks)
    wall = time.perf_counter() - t0
    producer.join()
    return {"tokens_per_s": n * tokens / wall, "writes_per_s": writes[0] / wall, "wall_s": wall,
            "bytes": size[0]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, default=64)
    ap.add_argument("--tokens", type=int, default=1500)
    ap.add_argument("--step-ms", type=float, default=0.0, help="engine step time (0: as fast as it goes)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = {mode: asyncio.run(run(mode, args.streams, args.tokens, args.step_ms / 1e3))
            for mode in ("per-token", "batched")}
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{args.streams} streams x {args.tokens} tokens, engine step {args.step_ms:g} ms")
    print(f"{'':10} {'tokens/s':>12} {'writes/s':>12} {'wall s':>8}")
    for mode, r in rows.items():
        print(f"{mode:10} {r['tokens_per_s']:12,.0f} {r['writes_per_s']:12,.0f} {r['wall_s']:8.2f}")
    base, new = rows["per-token"]["tokens_per_s"], rows["batched"]["tokens_per_s"]
    print(f"batched delivers {new / base:.2f}x the per-token path's tokens/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
