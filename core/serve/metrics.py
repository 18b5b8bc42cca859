"""Prometheus `/metrics` for the embedded engine, with SGLang's names under our own prefix.

The names mirror SGLang's (`sglang:token_usage` -> `bringup:token_usage`, ...; sglang-notes §5.1),
so one scraper (`core/client/metrics_scrape.py`) reads our engine and a real SGLang server alike. Like
SGLang, `token_usage` is the fuller pool (KV, SWA or state), the SWA pool's counts are
`swa_{used,available}_tokens` and `swa_token_usage` (0 for a model without an SWA pool), and the mamba slot counts are also exported
under SGLang's `mamba_*_tokens` spelling (they are slot counts there too).

The text exposition format is small enough to write by hand, which keeps the engine free of a
global metrics registry: every server owns one `EngineMetrics`, written by the engine loop thread
and read by the HTTP handler, under one lock.
"""

from __future__ import annotations

import bisect
import collections
import math
import threading
import time

PREFIX = "bringup:"

# SGLang's default buckets (seconds), trimmed at the long end.
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                15.0, 20.0, 25.0, 30.0, 40.0, 60.0, 120.0, 400.0)
ITL_BUCKETS = (0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08, 0.1, 0.2,
               0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0)
E2E_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 120.0, 300.0, 600.0,
               1200.0, 2400.0)
# Throughput is averaged over this many seconds of recent steps (SGLang: one log interval).
THROUGHPUT_WINDOW_S = 5.0


def _fmt(value: float) -> str:
    if isinstance(value, float) and math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer():
        return str(int(value))
    return repr(float(value))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class Histogram:
    """Cumulative buckets, sum and count, as Prometheus wants them."""

    def __init__(self, buckets: tuple[float, ...]):
        self.bounds = tuple(sorted(buckets))
        self.counts = [0] * (len(self.bounds) + 1)  # the last one is +Inf
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value
        self.count += 1

    def lines(self, name: str, labels: str) -> list[str]:
        out, running = [], 0
        for bound, n in zip(self.bounds + (math.inf,), self.counts):
            running += n
            sep = "," if labels else ""
            out.append(f'{name}_bucket{{{labels}{sep}le="{_fmt(bound)}"}} {running}')
        lab = f"{{{labels}}}" if labels else ""
        out.append(f"{name}_sum{lab} {_fmt(self.sum)}")
        out.append(f"{name}_count{lab} {self.count}")
        return out


class ThroughputWindow:
    """Tokens per second over the steps of the last `window` seconds.

    The span is measured from the start of the oldest step still in the window, so the rate is
    right within one step of load starting, and decays to zero over `window` once load stops.
    """

    def __init__(self, window: float = THROUGHPUT_WINDOW_S):
        self.window = window
        self.steps: collections.deque[tuple[float, float, int]] = collections.deque()  # (start, end, tokens)

    def add(self, start: float, end: float, tokens: int) -> None:
        if tokens > 0:
            self.steps.append((start, end, tokens))

    def rate(self, now: float) -> float:
        horizon = now - self.window
        while self.steps and self.steps[0][1] < horizon:
            self.steps.popleft()
        if not self.steps:
            return 0.0
        span = now - max(horizon, self.steps[0][0])
        return sum(s[2] for s in self.steps) / span if span > 0 else 0.0


class EngineMetrics:
    """All the figures `/metrics` serves. Thread-safe: the engine loop writes, handlers read."""

    def __init__(self, model_name: str, *, window: float = THROUGHPUT_WINDOW_S, static: dict | None = None):
        self.model_name = model_name
        self._lock = threading.Lock()
        self._gen = ThroughputWindow(window)
        self._prompt = ThroughputWindow(window)
        self.gauges: dict[str, float] = {}
        self.static = dict(static or {})  # start-up constants: max_total_num_tokens, page_size...
        self.counters = collections.Counter()
        self.finished_by_reason = collections.Counter()
        self.rejected_by_reason = collections.Counter()  # queue_full, draining, too_many_prompts...
        self.ttft = Histogram(TTFT_BUCKETS)
        self.itl = Histogram(ITL_BUCKETS)
        self.e2e = Histogram(E2E_BUCKETS)
        self.started = time.time()

    # ---- writers (engine loop thread) -------------------------------------------------------

    def record_step(self, start: float, end: float, prompt_tokens: int, generated_tokens: int) -> None:
        """One engine step that computed `prompt_tokens` of prefill and sampled `generated_tokens`."""
        with self._lock:
            self._prompt.add(start, end, prompt_tokens)
            self._gen.add(start, end, generated_tokens)
            self.counters["prompt_tokens_total"] += prompt_tokens
            self.counters["generation_tokens_total"] += generated_tokens

    def record_pools(self, stats: dict) -> None:
        """Pool and queue gauges from `Engine.stats()`."""
        kv_used = int(stats.get("kv_tokens_used", 0))
        kv_total = int(stats.get("kv_tokens_total", 0))
        slots_used = int(stats.get("state_slots_used", 0))
        slots_total = int(stats.get("state_slots_total", 0))
        swa_used = int(stats.get("swa_tokens_used", 0))
        swa_total = int(stats.get("swa_tokens_total", 0))
        full = kv_used / kv_total if kv_total else 0.0
        mamba = slots_used / slots_total if slots_total else 0.0
        swa = swa_used / swa_total if swa_total else 0.0
        with self._lock:
            self.counters["swa_evicted_tokens_total"] = int(stats.get("swa_evicted_tokens_total", 0))
            self.gauges.update({
                "num_running_reqs": int(stats.get("num_running", 0)),
                "num_queue_reqs": int(stats.get("num_queued", 0)),
                "token_usage": max(full, swa, mamba),  # SGLang: the fuller pool
                "swa_token_usage": swa,
                "swa_used_tokens": swa_used,
                "swa_available_tokens": swa_total - swa_used,
                "max_total_num_tokens_swa": swa_total,
                "full_token_usage": full,
                "mamba_usage": mamba,
                "num_used_tokens": kv_used,
                "kv_used_tokens": kv_used,
                "kv_available_tokens": kv_total - kv_used,
                "kv_total_tokens": kv_total,
                "max_total_num_tokens": kv_total,
                "mamba_used_slots": slots_used,
                "mamba_available_slots": slots_total - slots_used,
                "mamba_total_slots": slots_total,
                "mamba_used_tokens": slots_used,  # SGLang's spelling: slot counts despite the name
                "mamba_available_tokens": slots_total - slots_used,
            })

    def record_request_start(self) -> None:
        with self._lock:
            self.counters["num_requests_total"] += 1

    def record_first_token(self, seconds: float) -> None:
        with self._lock:
            self.ttft.observe(seconds)

    def record_inter_token(self, seconds: float, tokens: int = 1) -> None:
        """A chunk of `tokens` tokens arrived `seconds` after the previous one."""
        with self._lock:
            for _ in range(max(tokens, 1)):
                self.itl.observe(seconds / max(tokens, 1))

    def record_request_end(self, finish_reason: str | None, seconds: float) -> None:
        with self._lock:
            self.e2e.observe(seconds)
            self.finished_by_reason[finish_reason or "unknown"] += 1
            if finish_reason == "abort":
                self.counters["num_aborted_requests_total"] += 1

    def record_bad_request(self) -> None:
        with self._lock:
            self.counters["num_bad_requests_total"] += 1

    def record_rejection(self, reason: str) -> None:
        """A request refused by admission control (429/503/413) before reaching the engine."""
        with self._lock:
            self.counters["num_rejected_requests_total"] += 1
            self.rejected_by_reason[reason] += 1

    # ---- readers ---------------------------------------------------------------------------

    def throughput(self, now: float | None = None) -> tuple[float, float]:
        """(generation, prompt) tokens per second over the sliding window."""
        now = time.monotonic() if now is None else now
        with self._lock:
            return self._gen.rate(now), self._prompt.rate(now)

    def snapshot(self) -> dict:
        gen, prompt = self.throughput()
        with self._lock:
            return {**self.static, **self.gauges, **dict(self.counters), "gen_throughput": gen,
                    "prompt_throughput": prompt}

    def render(self) -> str:
        """The Prometheus text exposition (format 0.0.4)."""
        gen, prompt = self.throughput()
        labels = f'model_name="{_escape(self.model_name)}"'
        out: list[str] = []

        def metric(name: str, kind: str, help_text: str, value: float) -> None:
            full = PREFIX + name
            out.extend((f"# HELP {full} {help_text}", f"# TYPE {full} {kind}", f"{full}{{{labels}}} {_fmt(value)}"))

        with self._lock:
            g = dict(self.gauges)
            for name, help_text in _GAUGE_HELP.items():
                metric(name, "gauge", help_text, g.get(name, 0))
            metric("gen_throughput", "gauge", "Generation throughput (tokens/s) over a sliding window.", gen)
            metric("prompt_throughput", "gauge", "Prompt (prefill) throughput (tokens/s) over a sliding window.", prompt)
            for name, value in sorted(self.static.items()):
                metric(name, "gauge", "Start-up constant.", value)
            for name, help_text in _COUNTER_HELP.items():
                metric(name, "counter", help_text, self.counters.get(name, 0))
            full = PREFIX + "num_finished_requests_total"
            out += [f"# HELP {full} Finished requests by finish reason.", f"# TYPE {full} counter"]
            for reason, n in sorted(self.finished_by_reason.items()):
                out.append(f'{full}{{{labels},finish_reason="{_escape(reason)}"}} {n}')
            full = PREFIX + "num_rejected_requests_by_reason_total"
            out += [f"# HELP {full} Requests refused by admission control, by reason.", f"# TYPE {full} counter"]
            for reason, n in sorted(self.rejected_by_reason.items()):
                out.append(f'{full}{{{labels},reason="{_escape(reason)}"}} {n}')
            for name, hist, help_text in (
                ("time_to_first_token_seconds", self.ttft, "Time to first token (s)."),
                ("inter_token_latency_seconds", self.itl, "Time between output tokens (s)."),
                ("e2e_request_latency_seconds", self.e2e, "Request latency from arrival to finish (s)."),
            ):
                full = PREFIX + name
                out += [f"# HELP {full} {help_text}", f"# TYPE {full} histogram"]
                out += hist.lines(full, labels)
        return "\n".join(out) + "\n"


_GAUGE_HELP = {
    "num_running_reqs": "Requests running (holding pool space).",
    "num_queue_reqs": "Requests waiting in the queue.",
    "token_usage": "Usage of the fuller pool, max(full_token_usage, swa_token_usage, mamba_usage), as SGLang.",
    "swa_token_usage": "Fraction of SWA-pool tokens in use (sliding-window layers; 0 without an SWA pool).",
    "swa_used_tokens": "SWA-pool tokens in use.",
    "swa_available_tokens": "SWA-pool tokens free.",
    "max_total_num_tokens_swa": "Tokens in the SWA pool (SGLang's name).",
    "full_token_usage": "Fraction of KV-pool tokens in use (full-attention layers).",
    "mamba_usage": "Fraction of state-pool slots in use (Mamba2 layers).",
    "num_used_tokens": "KV tokens in use.",
    "kv_used_tokens": "KV tokens in use.",
    "kv_available_tokens": "KV tokens free.",
    "kv_total_tokens": "KV tokens in the pool.",
    "max_total_num_tokens": "KV tokens in the pool (SGLang's name).",
    "mamba_used_slots": "State slots in use.",
    "mamba_available_slots": "State slots free.",
    "mamba_total_slots": "State slots in the pool.",
    "mamba_used_tokens": "State slots in use (SGLang's spelling).",
    "mamba_available_tokens": "State slots free (SGLang's spelling).",
}
_COUNTER_HELP = {
    "prompt_tokens_total": "Prompt tokens prefilled.",
    "generation_tokens_total": "Tokens generated.",
    "num_requests_total": "Requests received.",
    "num_aborted_requests_total": "Requests aborted (client gone or refused by the engine).",
    "num_bad_requests_total": "Requests rejected with a 4xx.",
    "num_rejected_requests_total": "Requests refused by admission control (queue full, draining, too large).",
    "swa_evicted_tokens_total": "SWA-pool tokens freed because the sliding window moved past them.",
}
