"""What the API answers: per-request results and the three response shapes.

OpenAI completions and chat completions (whole, or as server-sent event chunks with `delta`s) and
SGLang's `/generate` (one object per prompt; streamed events are cumulative, as SGLang sends them).
"""

from __future__ import annotations

import time
import uuid

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

    def add(self, out) -> None:
        self.output_ids.extend(out.token_ids)
        self.text += out.text
        if out.finished:
            self.finish_reason = out.finish_reason
            self.error = out.error
            self.latency = time.monotonic() - self.start
        self.prompt_tokens = out.prompt_tokens or self.prompt_tokens


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


class CompletionFormat:
    object = "text_completion"

    def __init__(self, model: str):
        self.model, self.id, self.created = model, new_id("cmpl"), int(time.time())

    def _frame(self, choices: list, usage: dict | None = None, obj: str | None = None) -> dict:
        body = {"id": self.id, "object": obj or self.object, "created": self.created, "model": self.model,
                "choices": choices}
        if usage is not None:
            body["usage"] = usage
        return body

    def _choice(self, index: int, text: str, finish_reason) -> dict:
        return {"index": index, "text": text, "logprobs": None, "finish_reason": finish_reason}

    def whole(self, results: list[Result], work: Work) -> dict:
        choices = [self._choice(i, r.text, r.finish_reason) for i, r in enumerate(results)]
        return self._frame(choices, sum_usage(results))

    def stream_start(self, results, work):
        return []

    def stream_chunk(self, res: Result, index: int, out, work: Work):
        if out.text or out.finished:
            yield self._frame([self._choice(index, out.text, out.finish_reason if out.finished else None)])

    def stream_end(self, results, work: Work):
        if work.include_usage:
            yield self._frame([], sum_usage(results))


class ChatFormat(CompletionFormat):
    object = "chat.completion"

    def __init__(self, model: str):
        super().__init__(model)
        self.id = new_id("chatcmpl")

    def whole(self, results: list[Result], work: Work) -> dict:
        choices = [{"index": i, "message": {"role": "assistant", "content": r.text}, "logprobs": None,
                    "finish_reason": r.finish_reason} for i, r in enumerate(results)]
        return self._frame(choices, sum_usage(results))

    def _delta(self, index: int, delta: dict, finish_reason=None) -> dict:
        return self._frame([{"index": index, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
                           obj="chat.completion.chunk")

    def stream_start(self, results, work):
        return [self._delta(i, {"role": "assistant", "content": ""}) for i in range(len(results))]

    def stream_chunk(self, res: Result, index: int, out, work: Work):
        if out.text:
            yield self._delta(index, {"content": out.text})
        if out.finished:
            yield self._delta(index, {}, out.finish_reason)

    def stream_end(self, results, work: Work):
        if work.include_usage:
            yield self._frame([], sum_usage(results), obj="chat.completion.chunk")


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
        if out.token_ids or out.finished:
            item = self._item(res)
            if work.batch:
                item["index"] = index
            yield item

    def stream_end(self, results, work):
        return []


def sum_usage(results: list[Result]) -> dict:
    prompt = sum(r.prompt_tokens for r in results)
    completion = sum(len(r.output_ids) for r in results)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
