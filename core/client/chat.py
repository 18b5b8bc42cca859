"""Stream a chat answer from an OpenAI-compatible server, timing it the way demo audiences compare:
time to first token, overall tokens/s, and the decode rate after the first token ("2nd+ tok/s").

Tokens are the server's own count (`usage.completion_tokens`, asked for with
`stream_options.include_usage`, which our engine and SGLang both honour): a stream chunk may carry
several tokens, or none, so counting chunks reads low. A server that sends no usage leaves
`tokens_counted_by` at "chunks", and the figures say so."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Callable, Iterator

from bringup.core.client.server_http import connection_for


@dataclass
class AnswerTiming:
    tokens: int = 0  # the server's completion_tokens when it reports usage, else text chunks
    ttft_s: float | None = None
    total_s: float = 0.0
    chunks: int = 0
    tokens_counted_by: str = "chunks"  # "server" once a usage block arrived

    @property
    def tok_s(self) -> float | None:
        return self.tokens / self.total_s if self.tokens and self.total_s > 0 else None

    @property
    def decode_tok_s(self) -> float | None:
        """Tokens after the first, over the time after the first."""
        if self.ttft_s is None or self.tokens < 2 or self.total_s <= self.ttft_s:
            return None
        return (self.tokens - 1) / (self.total_s - self.ttft_s)


def stream_chat(base_url: str, messages: list[dict], *, model: str = "default", max_tokens: int = 256,
                temperature: float = 0.7, top_p: float = 1.0, api_key: str | None = None,
                timing: AnswerTiming | None = None, should_stop: Callable[[], bool] = lambda: False,
                timeout: float = 120.0) -> Iterator[str]:
    """Yield text pieces as they arrive; fills `timing` as it goes. Raises OSError on HTTP errors."""
    timing = timing if timing is not None else AnswerTiming()
    body = {"model": model, "messages": messages, "max_tokens": max_tokens, "temperature": temperature,
            "top_p": top_p, "stream": True, "stream_options": {"include_usage": True}}
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    try:
        conn = connection_for(base_url, timeout)
    except ValueError as err:
        raise OSError(str(err)) from None
    start = time.monotonic()
    try:
        conn.request("POST", "/v1/chat/completions", body=json.dumps(body).encode(), headers=headers)
        resp = conn.getresponse()
        if resp.status != 200:
            raise OSError(f"HTTP {resp.status}: {resp.read(500).decode('utf-8', 'replace')}")
        while not should_stop():
            line = resp.readline()
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                break
            try:
                chunk = json.loads(payload)
            except ValueError:
                continue
            if "error" in chunk:
                raise OSError(str(chunk["error"]))
            usage = chunk.get("usage") or {}
            if isinstance(usage.get("completion_tokens"), int):
                timing.tokens, timing.tokens_counted_by = usage["completion_tokens"], "server"
            for choice in chunk.get("choices", []):
                piece = (choice.get("delta") or {}).get("content") or ""
                if piece:
                    now = time.monotonic() - start
                    if timing.ttft_s is None:
                        timing.ttft_s = now
                    timing.chunks += 1
                    if timing.tokens_counted_by == "chunks":
                        timing.tokens = timing.chunks
                    timing.total_s = now
                    yield piece
    finally:
        conn.close()
        timing.total_s = max(timing.total_s, 0.0) or (time.monotonic() - start)
