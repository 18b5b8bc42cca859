"""Stream a chat answer from an OpenAI-compatible server, timing it the way demo audiences compare:
time to first token, overall tokens/s, and the decode rate after the first token ("2nd+ tok/s")."""

from __future__ import annotations

import http.client
import json
import time
import urllib.parse
from dataclasses import dataclass
from typing import Callable, Iterator


@dataclass
class AnswerTiming:
    tokens: int = 0
    ttft_s: float | None = None
    total_s: float = 0.0

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
    url = urllib.parse.urlsplit(base_url)
    body = {"model": model, "messages": messages, "max_tokens": max_tokens, "temperature": temperature,
            "top_p": top_p, "stream": True}
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    conn = http.client.HTTPConnection(url.hostname, url.port or 80, timeout=timeout)
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
            for choice in chunk.get("choices", []):
                piece = (choice.get("delta") or {}).get("content") or ""
                if piece:
                    now = time.monotonic() - start
                    if timing.ttft_s is None:
                        timing.ttft_s = now
                    timing.tokens += 1
                    timing.total_s = now
                    yield piece
    finally:
        conn.close()
        timing.total_s = max(timing.total_s, 0.0) or (time.monotonic() - start)
