"""Prometheus `/metrics` for the embedded engine, with SGLang's names under our own prefix.

The names mirror SGLang's (`sglang:token_usage` -> `bringup:token_usage`, ...; sglang-notes §5.1),
so one scraper (`core/client/metrics_scrape.py`) reads our engine and a real SGLang server alike. Like
SGLang, `token_usage` is the fuller pool (KV, SWA or state), the SWA pool's counts are
`swa_{used,available}_tokens` and `swa_token_usage` (0 for a model without an SWA pool), and the mamba slot counts are also exported
under SGLang's `mamba_*_tokens` spelling (they are slot counts there too).

The exposition is `prometheus_client`'s: each server owns one `CollectorRegistry` holding one
collector that reads this object's figures, so two servers in one process (the tests) never share
a global registry. The figures themselves live here, written by the engine loop thread and read by
the HTTP handler under one lock; `snapshot()` (`/server_info`) reads the same ones.
"""

from __future__ import annotations

import bisect
import collections
import math
import threading
import time

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

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

    def cumulative(self) -> list[tuple[str, int]]:
        """(upper bound, observations at or below it) per bucket, ending with +Inf."""
        out, running = [], 0
        for bound, n in zip(self.bounds + (math.inf,), self.counts):
            running += n
            out.append(("+Inf" if math.isinf(bound) else repr(float(bound)), running))
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
        # This server's own registry (never the process-wide default): described lazily, read on scrape.
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)

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
        """The Prometheus text exposition (format 0.0.4), written by prometheus_client."""
        return generate_latest(self.registry).decode("utf-8")

    def collect(self):
        """prometheus_client's collector protocol: every family, read under the lock at once."""
        gen, prompt = self.throughput()
        model = [self.model_name]

        def family(kind, name: str, help_text: str, value: float):
            fam = kind(PREFIX + name, help_text, labels=["model_name"])
            fam.add_metric(model, value)
            return fam

        with self._lock:
            out = [family(GaugeMetricFamily, name, help_text, self.gauges.get(name, 0))
                   for name, help_text in _GAUGE_HELP.items()]
            out.append(family(GaugeMetricFamily, "gen_throughput",
                              "Generation throughput (tokens/s) over a sliding window.", gen))
            out.append(family(GaugeMetricFamily, "prompt_throughput",
                              "Prompt (prefill) throughput (tokens/s) over a sliding window.", prompt))
            out += [family(GaugeMetricFamily, name, "Start-up constant.", value)
                    for name, value in sorted(self.static.items())]
            out += [family(CounterMetricFamily, name, help_text, self.counters.get(name, 0))
                    for name, help_text in _COUNTER_HELP.items()]
            for name, label, help_text, counts in (
                ("num_finished_requests_total", "finish_reason", "Finished requests by finish reason.",
                 self.finished_by_reason),
                ("num_rejected_requests_by_reason_total", "reason", "Requests refused by admission control, by reason.",
                 self.rejected_by_reason),
            ):
                fam = CounterMetricFamily(PREFIX + name, help_text, labels=["model_name", label])
                for reason, n in sorted(counts.items()):
                    fam.add_metric([self.model_name, reason], n)
                out.append(fam)
            for name, hist, help_text in (
                ("time_to_first_token_seconds", self.ttft, "Time to first token (s)."),
                ("inter_token_latency_seconds", self.itl, "Time between output tokens (s)."),
                ("e2e_request_latency_seconds", self.e2e, "Request latency from arrival to finish (s)."),
            ):
                fam = HistogramMetricFamily(PREFIX + name, help_text, labels=["model_name"])
                fam.add_metric(model, hist.cumulative(), hist.sum)
                out.append(fam)
        return out


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
