"""SIGTERM / SIGINT under load: no new work, running streams finish or end properly, a clean exit.

Two servers of their own (a signal ends them) on the tiny checkpoint.
"""

from __future__ import annotations

import json
import signal
import threading
import time

import httpx
import pytest

from server_helpers import API_KEY, start_server, tiny_checkpoint

HEADERS = {"Authorization": f"Bearer {API_KEY}"}
SHORT = 1200  # tokens of the stream that finishes within the grace
pytestmark = pytest.mark.slow  # starts real servers


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    checkpoint = tiny_checkpoint(tmp_path_factory.mktemp("drain_models"))
    # Started from this thread: the engine's parent-death signal follows the thread that forked it.
    started = {"term": start_server(checkpoint, "--max-running-requests", "2", key_in_env=True),
               "int": start_server(checkpoint, "--max-running-requests", "2", "--drain-grace", "1",
                                           "--context", "3000", key_in_env=True)}
    yield started
    for srv in started.values():
        srv.process.stop()


class Stream(threading.Thread):
    """One streaming completion read to its end: its events, and whether it ended with [DONE]."""

    def __init__(self, base_url: str, max_tokens: int):
        super().__init__()
        self.base_url, self.max_tokens = base_url, max_tokens
        # Made here, not in run(): a client's SSL set-up takes a while on a loaded machine, and the
        # test's timeline (queued before SIGTERM) must not wait for it.
        self.client = httpx.Client(base_url=base_url, headers=HEADERS, timeout=60)
        self.events: list[dict] = []
        self.done = False
        self.status = None
        self.failure: Exception | None = None

    def run(self) -> None:
        body = {"prompt": [5, 6, 7], "max_tokens": self.max_tokens, "ignore_eos": True, "stream": True,
                "stream_options": {"include_usage": True}}
        try:
            with self.client as c:
                with c.stream("POST", "/v1/completions", json=body) as r:
                    self.status = r.status_code
                    for line in r.iter_lines():
                        if line == "data: [DONE]":
                            self.done = True
                        elif line.startswith("data: "):
                            self.events.append(json.loads(line[6:]))
        except Exception as err:  # noqa: BLE001 - reported by the test
            self.failure = err

    @property
    def tokens(self) -> int:
        return sum(1 for e in self.events for c in e.get("choices", []) if c.get("text"))

    @property
    def usage(self) -> int | None:
        used = [e["usage"]["completion_tokens"] for e in self.events if e.get("usage")]
        return used[-1] if used else None

    @property
    def errors(self) -> list[str]:
        return [e["error"]["message"] for e in self.events if "error" in e]

    @property
    def finish(self) -> str | None:
        reasons = [c["finish_reason"] for e in self.events for c in e.get("choices", []) if c.get("finish_reason")]
        return reasons[-1] if reasons else None


def wait_for_tokens(streams, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not all(s.tokens for s in streams):
        assert time.monotonic() < deadline, [(s.status, s.failure, s.events[:2]) for s in streams]
        time.sleep(0.02)


def test_sigterm_under_load_drains_and_ends_every_stream_properly(servers):
    srv = servers["term"]  # the default grace (30 s): a second signal ends the long stream below
    # `short` must still be running at SIGTERM (were it done, a queued stream would start, and run
    # its 2000 tokens in the grace): 1200 tokens outlast the set-up below even on a loaded machine,
    # and still end well within the 30 s grace.
    short, long_run = Stream(srv.base_url, SHORT), Stream(srv.base_url, 2000)
    queued = [Stream(srv.base_url, 2000) for _ in range(2)]  # two slots are busy: these wait
    admin = httpx.Client(base_url=srv.base_url, headers=HEADERS, timeout=10)
    short.start(), long_run.start()
    wait_for_tokens([short, long_run])
    before = admin.get("/server_info").json()["stats"]["requests_total"]  # short and long_run included
    for s in queued:
        s.start()
    # Both late requests have reached the engine before SIGTERM: otherwise the signal races their POSTs.
    deadline = time.monotonic() + 60
    while (stats := admin.get("/server_info").json()["stats"])["requests_total"] < before + 2:
        assert time.monotonic() < deadline, stats
        time.sleep(0.01)
    admin.close()
    srv.process.proc.send_signal(signal.SIGTERM)
    time.sleep(0.2)
    with httpx.Client(base_url=srv.base_url, headers=HEADERS, timeout=10) as c:
        health = c.get("/health")
        assert health.status_code == 503 and health.headers["Retry-After"] == "5"  # a drain says when
        late = c.post("/v1/completions", json={"prompt": [5], "max_tokens": 1})
        assert late.status_code == 503 and late.headers["Retry-After"]
    for s in (*queued, short):
        s.join(timeout=60)
    assert long_run.is_alive(), [(s.usage, s.errors) for s in (short, long_run, *queued)]  # within its grace
    srv.process.proc.send_signal(signal.SIGTERM)
    long_run.join(timeout=30)
    code = srv.process.proc.wait(timeout=30)

    streams = (short, long_run, *queued)
    assert all(s.failure is None and s.status == 200 and s.done for s in streams), [
        (s.failure, s.status, s.done, s.usage, s.errors) for s in streams]
    assert short.usage == SHORT and short.finish == "length" and not short.errors  # finished within the grace
    for s in queued:  # never started: ended at once, for another server to take
        assert s.usage == 0 and s.errors and "before this request started" in s.errors[0]
    assert long_run.errors and "second signal" in long_run.errors[0] and 0 < long_run.usage < 2000
    assert code == 0
    srv.process.wait_log_drained()
    assert "Traceback" not in srv.log and "ERROR" not in srv.log, srv.log[-3000:]
    assert "SIGTERM received: draining" in srv.log


def test_sigint_ends_running_streams_when_the_grace_runs_out_without_tracebacks(servers):
    srv = servers["int"]  # --drain-grace 1, --context 3000
    with httpx.Client(base_url=srv.base_url, headers=HEADERS, timeout=10) as c:
        assert c.get("/v1/models").json()["data"][0]["max_model_len"] == 3000  # serve's --context
    stream = Stream(srv.base_url, 2000)
    stream.start()
    wait_for_tokens([stream])
    srv.process.proc.send_signal(signal.SIGINT)
    stream.join(timeout=30)
    code = srv.process.proc.wait(timeout=30)
    assert stream.failure is None and stream.done, (stream.failure, stream.events[-3:])
    assert stream.errors and "grace ran out" in stream.errors[0] and 0 < stream.usage < 2000
    assert code == 130  # README: Ctrl-C exits 130, after the drain
    srv.process.wait_log_drained()
    assert "Traceback" not in srv.log and "ERROR" not in srv.log, srv.log[-3000:]
    assert "SIGINT received: draining" in srv.log
