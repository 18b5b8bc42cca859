"""What the API answers: per-request results and the three response shapes.

OpenAI completions and chat completions (whole, or as server-sent event chunks with `delta`s) and
SGLang's `/generate` (one object per prompt; streamed events are cumulative, as SGLang sends them).

Streams are hot (thousands of chunks a second on a busy server), so their stream methods return
encoded JSON text: what is the same in every chunk of a response (id, object, created, model) is
encoded once per response and only the choice is encoded per chunk, with one shared encoder. The
text is byte for byte what `json.dumps` gives for the same object (tests compare).
"""

from __future__ import annotations

import dataclasses
import json
import time
import uuid

from .logprobs import Pieces, chat_block, completion_block
from .protocol import Work


class Result:
    """One request's answer, accumulated from its StepOutputs."""

    def __init__(self, request_id: str, prompt_len: int):
        self.request_id = request_id
        self.prompt_tokens = prompt_len
        self.output_ids: list[int] = []
        self.text = ""
        self.finish_reason: str | None = None
        self.error: str | None = None
        self.start = time.monotonic()
        self.latency = 0.0
        self.logprobs: list = []  # the engine's TokenLogprob per output token, when the request asked
        self.logprob_offset = 0  # completions' text_offset where the next streamed token starts

    def add(self, out) -> None:
        self.output_ids.extend(out.token_ids)
        if out.logprobs:
            self.logprobs.extend(out.logprobs)
        self.text += out.text
        if out.finished:
            self.finish_reason = out.finish_reason
            self.error = out.error
            self.latency = time.monotonic() - self.start
        self.prompt_tokens = out.prompt_tokens or self.prompt_tokens


_encode = json.JSONEncoder().encode  # one encoder for every chunk (json.dumps builds one per call)


def coalesce(outs: list):
    """Several StepOutputs of one request as one: tokens and text joined, the last one's end."""
    if len(outs) == 1:
        return outs[0]
    ids = [t for out in outs for t in out.token_ids]
    logprobs = None if outs[-1].logprobs is None else [e for out in outs for e in out.logprobs or ()]
    return dataclasses.replace(outs[-1], token_ids=ids, text="".join(out.text for out in outs), logprobs=logprobs)


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


class CompletionFormat:
    object = "text_completion"

    def __init__(self, model: str, tokenizer=None):
        self.model, self.id, self.created = model, new_id("cmpl"), int(time.time())
        self._heads: dict[str, str] = {}  # object -> the chunk's constant head, encoded once
        self.pieces = Pieces(tokenizer)  # token texts for logprobs (only asked for when a request wants them)

    def _frame(self, choices: list, usage: dict | None = None, obj: str | None = None) -> dict:
        body = {"id": self.id, "object": obj or self.object, "created": self.created, "model": self.model,
                "choices": choices}
        if usage is not None:
            body["usage"] = usage
        return body

    def _choice(self, index: int, res: Result, asked: bool) -> dict:
        logprobs = completion_block(res.logprobs, self.pieces, 0)[0] if asked else None
        return {"index": index, "text": res.text, "logprobs": logprobs, "finish_reason": res.finish_reason}

    def whole(self, results: list[Result], work: Work) -> dict:
        choices = [self._choice(i, r, p.logprobs is not None) for i, (r, p) in enumerate(zip(results, work.params))]
        return self._frame(choices, sum_usage(results))

    # ---- streams: encoded JSON text ------------------------------------------------------------

    def _head(self, obj: str) -> str:
        """`{"id": ..., "object": obj, "created": ..., "model": ..., "choices": ` encoded once."""
        if obj not in self._heads:
            whole = _encode({"id": self.id, "object": obj, "created": self.created, "model": self.model, "choices": 0})
            self._heads[obj] = whole[:-2]  # drop the placeholder 0 and the closing brace
        return self._heads[obj]

    def _chunk(self, choices: str, obj: str, usage: dict | None) -> str:
        return self._head(obj) + choices + ("}" if usage is None else ', "usage": ' + _encode(usage) + "}")

    def stream_start(self, results, work):
        return []

    def stream_chunk(self, res: Result, index: int, out, work: Work):
        if out.text or out.finished or out.logprobs:
            reason = _encode(out.finish_reason) if out.finished else "null"
            logprobs = "null"
            if out.logprobs is not None:
                block, res.logprob_offset = completion_block(out.logprobs, self.pieces, res.logprob_offset)
                logprobs = _encode(block)
            choice = (f'[{{"index": {index}, "text": {_encode(out.text)}, "logprobs": {logprobs}, '
                      f'"finish_reason": {reason}}}]')
            yield self._chunk(choice, self.object, usage(res) if work.continuous_usage else None)

    def stream_end(self, results, work: Work):
        if work.include_usage:
            yield self._chunk("[]", self.object, sum_usage(results))


class ChatFormat(CompletionFormat):
    object = "chat.completion"

    def __init__(self, model: str, tokenizer=None):
        super().__init__(model, tokenizer)
        self.id = new_id("chatcmpl")

    def whole(self, results: list[Result], work: Work) -> dict:
        choices = [{"index": i, "message": {"role": "assistant", "content": r.text},
                    "logprobs": chat_block(r.logprobs, self.pieces) if p.logprobs is not None else None,
                    "finish_reason": r.finish_reason} for i, (r, p) in enumerate(zip(results, work.params))]
        return self._frame(choices, sum_usage(results))

    chunk_object = "chat.completion.chunk"

    def _delta(self, index: int, delta: str, finish_reason: str = "null", usage: dict | None = None,
               logprobs: str = "null") -> str:
        choice = f'[{{"index": {index}, "delta": {delta}, "logprobs": {logprobs}, "finish_reason": {finish_reason}}}]'
        return self._chunk(choice, self.chunk_object, usage)

    def stream_start(self, results, work):
        return [self._delta(i, '{"role": "assistant", "content": ""}') for i in range(len(results))]

    def stream_chunk(self, res: Result, index: int, out, work: Work):
        used = usage(res) if work.continuous_usage else None
        if out.text or out.logprobs:  # tokens whose text is held back still bring their logprobs
            logprobs = "null" if not out.logprobs else _encode(chat_block(out.logprobs, self.pieces))
            yield self._delta(index, '{"content": ' + _encode(out.text) + "}", usage=used, logprobs=logprobs)
        if out.finished:
            yield self._delta(index, "{}", _encode(out.finish_reason), usage=used)

    def stream_end(self, results, work: Work):
        if work.include_usage:
            yield self._chunk("[]", self.chunk_object, sum_usage(results))


class GenerateFormat:
    """SGLang's native shape: one object per prompt (a list for a batch); streams are cumulative."""

    @staticmethod
    def _item(res: Result) -> dict:
        reason = {"type": res.finish_reason} if res.finish_reason else None
        if reason and res.error:
            reason["message"] = res.error
        return {"text": res.text, "output_ids": list(res.output_ids), "meta_info": {
            "id": res.request_id, "finish_reason": reason, "prompt_tokens": res.prompt_tokens,
            "completion_tokens": len(res.output_ids), "cached_tokens": 0, "e2e_latency": round(res.latency, 6)}}

    def whole(self, results: list[Result], work: Work):
        items = [self._item(r) for r in results]
        return items if work.batch else items[0]

    def stream_start(self, results, work):
        return []

    def stream_chunk(self, res: Result, index: int, out, work: Work):
        if out.token_ids or out.finished:  # cumulative, as SGLang's: the whole item every time
            item = self._item(res)
            if work.batch:
                item["index"] = index
            yield _encode(item)

    def stream_end(self, results, work):
        return []


def usage(res: Result) -> dict:
    """One request's usage so far (stream_options.continuous_usage_stats)."""
    completion = len(res.output_ids)
    return {"prompt_tokens": res.prompt_tokens, "completion_tokens": completion,
            "total_tokens": res.prompt_tokens + completion}


def sum_usage(results: list[Result]) -> dict:
    prompt = sum(r.prompt_tokens for r in results)
    completion = sum(len(r.output_ids) for r in results)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
