"""Read an engine's Prometheus `/metrics` into one sample of the figures the Run tab graphs.

One reader serves our engine (`bringup:` names), a real SGLang server (`sglang:` names: ours follow
them, so only the prefix differs) and a vLLM server (`vllm:` names, mapped in VLLM_NAMES). A figure the source does not report is None
("no data"), never a false zero. Rates and mean latencies come from counter and histogram deltas
between two scrapes when the engine exports no gauge for them.
"""

from __future__ import annotations

import math
import urllib.request
from dataclasses import dataclass, fields

from prometheus_client.parser import text_string_to_metric_families

PREFIXES = ("bringup:", "sglang:", "vllm:")

# vLLM's names for the same figures, newest first (vllm 0.33.0 v1/metrics/loggers.py: num_requests_running
# :528, num_requests_waiting :538, kv_cache_usage_perc :620 (a 0..1 fraction of the one block pool that
# attention and Mamba share, despite the name), prompt_tokens :748 and generation_tokens :799 (counters,
# exported with _total), request_success :809, time_to_first_token_seconds :931, inter_token_latency_seconds
# :941). vllm 0.10.2 exports the older gpu_cache_usage_perc (loggers.py:212) beside kv_cache_usage_perc (:245);
# releases before it only the older name. vLLM exports no pool sizes: those panels say "no data".
VLLM_NAMES = {
    "num_running_reqs": ("num_requests_running",),
    "num_queue_reqs": ("num_requests_waiting",),
    "token_usage": ("kv_cache_usage_perc", "gpu_cache_usage_perc"),
    "num_requests_total": ("request_success_total",),
}

def parse_prometheus(text: str) -> dict[str, float]:
    """Sum each metric over its label sets (TP ranks, model names): `{name: value}`.

    prometheus_client's parser reads the text; histogram series keep their `_sum`/`_count`
    suffixes, `_bucket` series and NaN are skipped. A scrape the parser refuses as a whole
    (one malformed line from a proxy or a foreign exporter) is read line by line, so only the bad
    lines are lost, never every graph.
    """
    try:
        return _sum_samples(text_string_to_metric_families(text))
    except ValueError:
        out: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                try:
                    for name, value in _sum_samples(text_string_to_metric_families(line + "\n")).items():
                        out[name] = out.get(name, 0.0) + value
                except ValueError:
                    continue
        return out


def _sum_samples(families) -> dict[str, float]:
    out: dict[str, float] = {}
    for family in families:
        for sample in family.samples:
            if sample.name.endswith("_bucket") or math.isnan(sample.value):
                continue
            out[sample.name] = out.get(sample.name, 0.0) + sample.value
    return out


@dataclass
class EngineSample:
    """One point of every live graph; None means the source does not report it."""

    t: float
    kv_used: float | None = None
    kv_total: float | None = None
    state_used: float | None = None
    state_total: float | None = None
    token_usage: float | None = None  # the bottleneck pool's usage, 0..1
    full_token_usage: float | None = None
    mamba_usage: float | None = None
    swa_used: float | None = None  # SWA pool (sliding-window layers), tokens; None without one
    swa_total: float | None = None
    swa_token_usage: float | None = None
    gen_tok_s: float | None = None
    prompt_tok_s: float | None = None
    running: float | None = None
    queued: float | None = None
    ttft_s: float | None = None  # mean over the last interval
    itl_s: float | None = None
    requests_total: float | None = None

    def to_json(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


class MetricsReader:
    """Turns successive scrapes into samples; keeps the previous scrape for deltas."""

    def __init__(self) -> None:
        self.prefix: str | None = None
        self._prev: tuple[float, dict[str, float]] | None = None

    def _get(self, values: dict[str, float], *names: str) -> float | None:
        if self.prefix == "vllm:":
            names = tuple(n for name in names for n in VLLM_NAMES.get(name, (name,)))
        for name in names:
            key = f"{self.prefix}{name}"
            if key in values:
                return values[key]
        return None

    def _detect_prefix(self, values: dict[str, float]) -> str | None:
        for prefix in PREFIXES:
            if any(k.startswith(prefix) for k in values):
                return prefix
        return None

    def sample(self, text: str, t: float) -> EngineSample:
        values = parse_prometheus(text)
        self.prefix = self.prefix or self._detect_prefix(values)
        s = EngineSample(t=t)
        if self.prefix is None:
            return s
        g = lambda *names: self._get(values, *names)  # noqa: E731
        s.kv_used = g("kv_used_tokens", "num_used_tokens")
        s.kv_total = g("max_total_num_tokens", "kv_total_tokens")
        if s.kv_total is None and s.kv_used is not None:
            avail = g("kv_available_tokens")
            if avail is not None:
                s.kv_total = s.kv_used + avail + (g("kv_evictable_tokens") or 0.0)
        # SGLang calls mamba slot counts "tokens"; our engine exports both spellings.
        s.state_used = g("mamba_used_slots", "mamba_used_tokens")
        s.state_total = g("mamba_total_slots", "max_mamba_cache_size")
        if s.state_total is None and s.state_used is not None:
            avail = g("mamba_available_slots", "mamba_available_tokens")
            if avail is not None:
                s.state_total = s.state_used + avail + (g("mamba_evictable_tokens") or 0.0)
        s.swa_used = g("swa_used_tokens")
        s.swa_total = g("max_total_num_tokens_swa")
        if s.swa_total is None and s.swa_used is not None:
            avail = g("swa_available_tokens")
            if avail is not None:
                s.swa_total = s.swa_used + avail + (g("swa_evictable_tokens") or 0.0)
        if s.swa_total:  # a model without an SWA pool reports zeros: no SWA graph then
            s.swa_token_usage = g("swa_token_usage")
        else:
            s.swa_used = s.swa_total = None
        s.token_usage = g("token_usage")
        s.full_token_usage = g("full_token_usage")
        s.mamba_usage = g("mamba_usage")
        s.gen_tok_s = g("gen_throughput")
        s.prompt_tok_s = g("prompt_throughput")
        s.running = g("num_running_reqs")
        s.queued = g("num_queue_reqs")
        s.requests_total = g("num_requests_total")
        prev = self._prev
        self._prev = (t, values)
        if prev is not None:
            dt = t - prev[0]
            old = prev[1]

            def delta(name: str) -> float | None:
                key = f"{self.prefix}{name}"
                if key in values and key in old:
                    return values[key] - old[key]
                return None

            if s.prompt_tok_s is None and dt > 0:
                d = delta("prompt_tokens_total")
                s.prompt_tok_s = None if d is None else max(d, 0.0) / dt
            if s.gen_tok_s is None and dt > 0:
                d = delta("generation_tokens_total")
                s.gen_tok_s = None if d is None else max(d, 0.0) / dt
            s.ttft_s = _mean_delta(delta, "time_to_first_token_seconds")
            s.itl_s = _mean_delta(delta, "inter_token_latency_seconds")
        return s


def _mean_delta(delta, base: str) -> float | None:
    d_sum, d_count = delta(f"{base}_sum"), delta(f"{base}_count")
    if d_sum is None or not d_count:
        return None
    return d_sum / d_count


def fetch_metrics(base_url: str, timeout: float = 2.0, api_key: str | None = None) -> str:
    """GET {base_url}/metrics as text; raises OSError (URLError) when the server is unreachable."""
    req = urllib.request.Request(base_url.rstrip("/") + "/metrics")
    if api_key:
        req.add_header("Authorization", f"Bearer {api_key}")
    with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 (local URL by design)
        return resp.read().decode("utf-8", "replace")


