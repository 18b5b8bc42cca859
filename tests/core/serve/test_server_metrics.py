"""The Prometheus exposition of the engine's metrics, and its sliding-window throughput."""

from __future__ import annotations

import re

import pytest

from bringup.core.serve.metrics import EngineMetrics, Histogram, ThroughputWindow
from bringup.core.client.metrics_scrape import MetricsReader, parse_prometheus

_SAMPLE = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_]+="(?:[^"\\]|\\.)*",?)*\})? -?[0-9.e+Inf-]+$')


def busy_metrics() -> EngineMetrics:
    m = EngineMetrics('model "x"\\y', static={"page_size": 16})
    m.record_pools({"kv_tokens_used": 256, "kv_tokens_total": 1024, "state_slots_used": 3, "state_slots_total": 4,
                    "num_running": 3, "num_queued": 2})
    m.record_request_start()
    m.record_first_token(0.05)
    m.record_inter_token(0.02, 2)
    m.record_request_end("length", 0.5)
    return m


def test_every_line_is_valid_text_format_and_names_follow_sglang():
    text = busy_metrics().render()
    for line in text.splitlines():
        if line.startswith("# "):
            assert line.split()[1] in ("HELP", "TYPE")
        else:
            assert _SAMPLE.match(line), line
    values = parse_prometheus(text)
    for name in ("token_usage", "full_token_usage", "mamba_usage", "gen_throughput", "prompt_throughput",
                 "num_running_reqs", "num_queue_reqs", "kv_used_tokens", "kv_total_tokens", "mamba_used_slots",
                 "mamba_total_slots", "num_requests_total", "time_to_first_token_seconds_count",
                 "inter_token_latency_seconds_sum", "e2e_request_latency_seconds_count"):
        assert f"bringup:{name}" in values, name
    assert values["bringup:full_token_usage"] == 0.25
    assert values["bringup:mamba_usage"] == 0.75
    assert values["bringup:token_usage"] == 0.75  # the fuller pool, as SGLang
    assert values["bringup:inter_token_latency_seconds_count"] == 2
    assert values["bringup:page_size"] == 16


def test_the_gui_scraper_reads_it():
    sample = MetricsReader().sample(busy_metrics().render(), t=1.0)
    assert (sample.kv_used, sample.kv_total) == (256, 1024)
    assert (sample.state_used, sample.state_total) == (3, 4)
    assert (sample.running, sample.queued) == (3, 2)
    assert sample.requests_total == 1


def test_histogram_buckets_are_cumulative():
    h = Histogram((0.1, 1.0))
    for v in (0.05, 0.1, 0.5, 3.0):
        h.observe(v)
    assert h.cumulative() == [("0.1", 2), ("1.0", 3), ("+Inf", 4)]
    assert (h.count, h.sum) == (4, pytest.approx(3.65))


def test_each_server_has_its_own_registry_with_typed_families():
    from prometheus_client import CollectorRegistry, REGISTRY

    a, b = busy_metrics(), EngineMetrics("b")
    b.record_request_start()
    b.record_request_start()
    assert isinstance(a.registry, CollectorRegistry) and a.registry is not b.registry
    assert a.registry.get_sample_value("bringup:num_requests_total", {"model_name": 'model "x"\\y'}) == 1
    assert b.registry.get_sample_value("bringup:num_requests_total", {"model_name": "b"}) == 2
    assert REGISTRY.get_sample_value("bringup:num_requests_total", {"model_name": "b"}) is None  # not the global one
    kinds = {f.name: f.type for f in a.registry.collect()}
    assert kinds["bringup:num_requests"] == "counter" and kinds["bringup:token_usage"] == "gauge"
    assert kinds["bringup:time_to_first_token_seconds"] == "histogram"
    assert a.registry.get_sample_value("bringup:inter_token_latency_seconds_bucket",
                                       {"model_name": 'model "x"\\y', "le": "0.01"}) == 2


def test_a_malformed_line_costs_that_line_only():
    text = busy_metrics().render().replace("bringup:num_queue_reqs{", "bringup:num queue{", 1)
    values = parse_prometheus(text)
    assert "bringup:num_queue_reqs" not in values
    assert values["bringup:num_running_reqs"] == 3 and values["bringup:kv_total_tokens"] == 1024


def test_throughput_is_right_as_soon_as_load_starts_and_decays_when_it_stops():
    w = ThroughputWindow(window=5.0)
    w.add(100.0, 100.5, 50)
    w.add(100.5, 101.0, 50)
    assert w.rate(101.0) == pytest.approx(100.0)  # 100 tokens over the 1 s of work, not over 5 s
    assert w.rate(104.0) == pytest.approx(25.0)  # idle since 101: the window stretches
    assert w.rate(107.0) == 0.0  # every step left the window


def test_engine_metrics_throughput_from_steps():
    m = EngineMetrics("m", window=5.0)
    m.record_step(10.0, 10.2, prompt_tokens=40, generated_tokens=4)
    m.record_step(10.2, 10.4, prompt_tokens=0, generated_tokens=4)
    gen, prompt = m.throughput(now=10.4)
    assert gen == pytest.approx(20.0) and prompt == pytest.approx(100.0)
    assert m.snapshot()["generation_tokens_total"] == 8


def test_swa_pool_gauges_follow_sglang_and_reach_the_scraper():
    m = EngineMetrics("m")
    m.record_pools({"kv_tokens_used": 64, "kv_tokens_total": 1024, "swa_tokens_used": 96, "swa_tokens_total": 128,
                    "swa_evicted_tokens_total": 40, "num_running": 2})
    values = parse_prometheus(m.render())
    assert values["bringup:swa_token_usage"] == 0.75 and values["bringup:token_usage"] == 0.75  # the fuller pool
    assert values["bringup:max_total_num_tokens_swa"] == 128 and values["bringup:swa_available_tokens"] == 32
    assert values["bringup:swa_evicted_tokens_total"] == 40
    sample = MetricsReader().sample(m.render(), t=1.0)
    assert (sample.swa_used, sample.swa_total, sample.swa_token_usage) == (96, 128, 0.75)
    # A model without an SWA pool reports zeros, which the scraper turns into "not reported".
    plain = MetricsReader().sample(busy_metrics().render(), t=1.0)
    assert plain.swa_used is plain.swa_total is plain.swa_token_usage is None
