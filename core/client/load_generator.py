"""Put load on a running server so its pools fill and its graphs move.

Workers stream OpenAI-compatible `/v1/completions` requests (our engine and SGLang both serve it)
with random prompt and output lengths. Stopping closes the open streams: the server sees the client
go and frees the requests' slots, so a stopped load leaves the pools empty.
"""

from __future__ import annotations

import http.client
import json
import random
import threading
import time
import urllib.parse
from dataclasses import dataclass

from bringup.core.client.server_http import connection_for

_WORDS = (
    "the model maps each layer to a mixer and a feed forward block while the state pool keeps one "
    "slot per request and the paged cache grows with every generated token on the device"
).split()


@dataclass
class LoadSettings:
    concurrency: int = 4
    prompt_words: tuple[int, int] = (16, 64)
    output_tokens: tuple[int, int] = (32, 128)
    model: str = "default"
    api_key: str | None = None
    seed: int = 0


@dataclass
class LoadStats:
    started: int = 0
    completed: int = 0
    failed: int = 0
    tokens: int = 0
    last_error: str = ""


class LoadGenerator:
    def __init__(self, base_url: str, settings: LoadSettings | None = None) -> None:
        self.url = urllib.parse.urlsplit(base_url)
        self.settings = settings or LoadSettings()
        self.stats = LoadStats()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._conns: set[http.client.HTTPConnection] = set()

    @property
    def running(self) -> bool:
        return any(t.is_alive() for t in self._threads)

    def start(self) -> None:
        if self.running:
            return
        self._stop.clear()
        self._threads = [
            threading.Thread(target=self._worker, args=(i,), name=f"load-{i}", daemon=True)
            for i in range(max(1, self.settings.concurrency))
        ]
        for t in self._threads:
            t.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop issuing requests and close the open streams (the server aborts them)."""
        self._stop.set()
        with self._lock:
            for conn in list(self._conns):
                try:
                    if conn.sock is not None:
                        conn.sock.shutdown(2)  # wakes a worker blocked in readline
                except OSError:
                    pass
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))

    def _request_body(self, rng: random.Random) -> dict:
        s = self.settings
        words = [rng.choice(_WORDS) for _ in range(rng.randint(*s.prompt_words))]
        return {
            "model": s.model,
            "prompt": " ".join(words),
            "max_tokens": rng.randint(*s.output_tokens),
            "temperature": 0.8,
            "stream": True,
            "stream_options": {"include_usage": True},  # the server's token count, not our chunk count
            "ignore_eos": True,  # understood by our engine and SGLang; keeps lengths as asked
        }

    def _worker(self, index: int) -> None:
        rng = random.Random(self.settings.seed * 1000 + index)
        while not self._stop.is_set():
            body = json.dumps(self._request_body(rng)).encode()
            conn = connection_for(self.url.geturl(), timeout=60)
            with self._lock:
                self._conns.add(conn)
                self.stats.started += 1
            try:
                headers = {"Content-Type": "application/json"}
                if self.settings.api_key:
                    headers["Authorization"] = f"Bearer {self.settings.api_key}"
                conn.request("POST", "/v1/completions", body=body, headers=headers)
                resp = conn.getresponse()
                if resp.status != 200:
                    raise OSError(f"HTTP {resp.status}: {resp.read(300).decode('utf-8', 'replace')}")
                tokens = chunks = 0
                while not self._stop.is_set():
                    line = resp.readline()
                    if not line:
                        break
                    if line.startswith(b"data:") and b"[DONE]" not in line:
                        usage = _usage_tokens(line[5:])
                        if usage is not None:
                            tokens = usage
                        else:
                            chunks += 1
                tokens = tokens or chunks  # a server without usage: chunks are the best we have
                with self._lock:
                    self.stats.tokens += tokens
                    if not self._stop.is_set():
                        self.stats.completed += 1
            except (OSError, http.client.HTTPException) as err:
                if not self._stop.is_set():
                    with self._lock:
                        self.stats.failed += 1
                        self.stats.last_error = str(err)
                    self._stop.wait(0.5)  # a down server is not hammered
            finally:
                conn.close()
                with self._lock:
                    self._conns.discard(conn)


def _usage_tokens(payload: bytes) -> int | None:
    """completion_tokens of a usage chunk, else None (cheap test first: most chunks carry text)."""
    if b'"usage"' not in payload:
        return None
    try:
        usage = json.loads(payload).get("usage") or {}
    except ValueError:
        return None
    value = usage.get("completion_tokens")
    return value if isinstance(value, int) else None
