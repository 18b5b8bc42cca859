"""Stream batching (issue 28): what a loop turn brought goes out as one chunk per request, in one
write; tokens, text and order exact; `[DONE]` ends every stream. The streams are the server's own
(`RequestStream` queues, filled as the engine loop fills them); the formats' encoded chunks are
byte for byte json.dumps of the documented shapes."""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bringup.core.engine.request import StepOutput
from bringup.core.serve.async_engine import EngineFailed, RequestStream
from bringup.core.serve.formats import ChatFormat, CompletionFormat, GenerateFormat, Result
from bringup.core.serve.protocol import Work
from bringup.core.serve.streaming import DONE, sse


def outputs(rid: str, pieces: list[str], reason: str = "length") -> list[StepOutput]:
    """One StepOutput per piece (token ids 100 + position), the last one finished."""
    n = len(pieces)
    return [StepOutput(rid, [100 + i], piece, i == n - 1, reason if i == n - 1 else None, 4, i + 1)
            for i, piece in enumerate(pieces)]


def work(n: int = 1, **kw) -> Work:
    return Work([[1]] * n, [None] * n, n > 1, True, **kw)


async def read(body) -> list[str]:
    """The body's writes, each as it was yielded."""
    return [w async for w in body]


def events(writes: list[str]) -> list[str]:
    text = "".join(writes)
    assert text.endswith("\n\n")
    return [e.removeprefix("data: ") for e in text[:-2].split("\n\n")]


def test_outputs_ready_together_go_out_as_one_chunk_in_one_write():
    async def scenario():
        stream = RequestStream("r", 4)
        for out in outputs("r", ["He", "ll", "o", "!"]):
            stream.queue.put_nowait(out)  # four engine steps before the loop looked
        return await read(sse([stream], work(), CompletionFormat("m")))

    writes = asyncio.run(scenario())
    got = events(writes)
    assert got[-1] == "[DONE]" and writes[-1] == DONE
    chunks = [json.loads(e) for e in got[:-1]]
    assert len(chunks) == 1 and len(writes) == 2  # one coalesced chunk, one write, then [DONE]
    assert chunks[0]["choices"] == [{"index": 0, "text": "Hello!", "logprobs": None, "finish_reason": "length"}]


def test_generate_streams_coalesce_with_every_token_id_in_order():
    async def scenario():
        stream = RequestStream("r", 4)
        outs = outputs("r", ["a", "b", "c"])
        stream.queue.put_nowait(outs[0])
        body = sse([stream], work(), GenerateFormat())
        first = await body.__anext__()  # the first token alone: nothing else was ready
        for out in outs[1:]:
            stream.queue.put_nowait(out)
        return [first, *await read(body)]

    got = [json.loads(e) for e in events(asyncio.run(scenario()))[:-1]]
    assert [g["output_ids"] for g in got] == [[100], [100, 101, 102]]
    assert got[-1]["text"] == "abc" and got[-1]["meta_info"]["finish_reason"] == {"type": "length"}


texts = st.lists(st.text(alphabet=st.characters(codec="utf-8"), min_size=0, max_size=3), min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(pieces=st.lists(texts, min_size=1, max_size=4), bursts=st.lists(st.integers(1, 5), min_size=1, max_size=30),
       chat=st.booleans())
def test_any_burst_pattern_keeps_each_requests_text_and_order_exact(pieces, bursts, chat):
    """However the engine's outputs bunch up between loop turns, each request's text is its pieces
    in order, each ends once with its reason, and [DONE] is the last event."""
    n = len(pieces)

    async def scenario():
        streams = [RequestStream(f"r{i}", 4) for i in range(n)]
        queued = [list(outputs(f"r{i}", p)) for i, p in enumerate(pieces)]
        fmt = ChatFormat("m") if chat else CompletionFormat("m")
        body = sse(streams, work(n), fmt)
        reader = asyncio.ensure_future(read(body))
        turn = 0
        while any(queued):
            for i, q in enumerate(queued):  # this turn's burst for each request
                for _ in range(min(bursts[turn % len(bursts)], len(q))):
                    streams[i].queue.put_nowait(q.pop(0))
            turn += 1
            await asyncio.sleep(0)  # the loop turns: the stream may send what it has
        return await reader

    got = events(asyncio.run(scenario()))
    assert got[-1] == "[DONE]" and "[DONE]" not in got[:-1]
    text, ends = [""] * n, [0] * n
    for e in got[:-1]:
        for choice in json.loads(e)["choices"]:
            i = choice["index"]
            text[i] += choice["delta"].get("content", "") if chat else choice["text"]
            ends[i] += choice["finish_reason"] == "length"
            assert ends[i] <= 1  # nothing after a request's end
    assert text == ["".join(p) for p in pieces] and ends == [1] * n


def test_an_engine_failure_after_tokens_sends_them_then_the_error_then_done():
    async def scenario():
        stream = RequestStream("r", 4)
        stream.queue.put_nowait(outputs("r", ["x", "y"])[0])
        stream.queue.put_nowait(EngineFailed("the engine failed during a step: boom"))
        return await read(sse([stream], work(), CompletionFormat("m")))

    got = events(asyncio.run(scenario()))
    assert json.loads(got[0])["choices"][0]["text"] == "x"
    assert "boom" in json.loads(got[1])["error"]["message"] and got[2] == "[DONE]" and len(got) == 3


@pytest.mark.parametrize("fmt", [CompletionFormat("model \"q\"\u00e9"), ChatFormat("m")])
def test_encoded_chunks_are_json_dumps_of_the_documented_shapes(fmt):
    res = Result("r", 4)
    outs = outputs("r", ["caf\u00e9 \u2028", "\"quoted\"\\"], reason="stop")
    chat = isinstance(fmt, ChatFormat)
    obj = "chat.completion.chunk" if chat else "text_completion"
    head = {"id": fmt.id, "object": obj, "created": fmt.created, "model": fmt.model}
    w = work(include_usage=True, continuous_usage=True)
    got = []
    for out in outs:
        res.add(out)
        got += list(fmt.stream_chunk(res, 0, out, w))
    expected = []
    for k, out in enumerate(outs):
        used = {"prompt_tokens": 4, "completion_tokens": k + 1, "total_tokens": 5 + k}
        reason = out.finish_reason if out.finished else None
        if chat:
            expected.append({**head, "choices": [{"index": 0, "delta": {"content": out.text}, "logprobs": None,
                                                  "finish_reason": None}], "usage": used})
            if out.finished:
                expected.append({**head, "choices": [{"index": 0, "delta": {}, "logprobs": None,
                                                      "finish_reason": reason}], "usage": used})
        else:
            expected.append({**head, "choices": [{"index": 0, "text": out.text, "logprobs": None,
                                                  "finish_reason": reason}], "usage": used})
    assert got == [json.dumps(e) for e in expected]
    end = list(fmt.stream_end([res], w))
    assert end == [json.dumps({**head, "choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 2,
                                                                "total_tokens": 6}})]
