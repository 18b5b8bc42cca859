"""The Run tab's Qt-free parts: metrics scraping, start-up log parsing, the engine child process."""

import sys
import textwrap
import time

import psutil
import pytest

from bringup.core.client.engine_process import EngineProcess, free_port
from bringup.core.client.metrics_scrape import MetricsReader, parse_prometheus
from bringup.core.client.startup_log import StartupState, line_severity

OURS = """\
# HELP bringup:num_running_reqs Running requests
# TYPE bringup:num_running_reqs gauge
bringup:num_running_reqs{model_name="tiny"} 3
bringup:num_queue_reqs{model_name="tiny"} 1
bringup:kv_used_tokens{model_name="tiny"} 120
bringup:max_total_num_tokens{model_name="tiny"} 4096
bringup:mamba_used_tokens{model_name="tiny"} 3
bringup:mamba_available_tokens{model_name="tiny"} 13
bringup:token_usage{model_name="tiny"} 0.1875
bringup:gen_throughput{model_name="tiny"} 41.5
bringup:prompt_tokens_total{model_name="tiny"} 1000
bringup:time_to_first_token_seconds_bucket{le="0.1"} 2
bringup:time_to_first_token_seconds_sum{model_name="tiny"} 1.0
bringup:time_to_first_token_seconds_count{model_name="tiny"} 4
"""

SGLANG_TP2 = """\
sglang:num_running_reqs{tp_rank="0"} 2
sglang:num_running_reqs{tp_rank="1"} 0
sglang:kv_used_tokens{tp_rank="0"} 50
sglang:kv_available_tokens{tp_rank="0"} 900
sglang:kv_evictable_tokens{tp_rank="0"} 50
sglang:mamba_usage{tp_rank="0"} NaN
"""


def test_parse_sums_label_sets_and_skips_buckets_and_nan():
    values = parse_prometheus(SGLANG_TP2 + OURS)
    assert values["sglang:num_running_reqs"] == 2
    assert "sglang:mamba_usage" not in values
    assert not any(k.endswith("_bucket") for k in values)


def test_our_names_give_pools_usage_and_rates():
    reader = MetricsReader()
    first = reader.sample(OURS, t=10.0)
    assert (first.kv_used, first.kv_total) == (120, 4096)
    assert (first.state_used, first.state_total) == (3, 16)  # used + available slots
    assert (first.running, first.queued, first.gen_tok_s) == (3, 1, 41.5)
    assert first.prompt_tok_s is None and first.ttft_s is None  # no previous scrape: no data
    later = OURS.replace("prompt_tokens_total{model_name=\"tiny\"} 1000", "prompt_tokens_total{model_name=\"tiny\"} 1500")
    later = later.replace("seconds_sum{model_name=\"tiny\"} 1.0", "seconds_sum{model_name=\"tiny\"} 2.5")
    later = later.replace("seconds_count{model_name=\"tiny\"} 4", "seconds_count{model_name=\"tiny\"} 7")
    second = reader.sample(later, t=12.0)
    assert second.prompt_tok_s == pytest.approx(250.0)
    assert second.ttft_s == pytest.approx(0.5)


def test_sglang_names_and_missing_figures_are_none():
    s = MetricsReader().sample(SGLANG_TP2, t=0.0)
    assert s.kv_total == 1000  # used + available + evictable
    assert s.running == 2
    assert s.state_used is None and s.mamba_usage is None and s.gen_tok_s is None


def test_unknown_text_gives_an_empty_sample():
    s = MetricsReader().sample("not prometheus at all\n", t=0.0)
    assert s.kv_used is None and s.running is None


STARTUP = textwrap.dedent("""\
    [2026-07-23 10:00:00] Load weight begin. avail mem=20.00 GB
    [2026-07-23 10:00:03] Load weight end. elapsed=3.20 s, type=NemotronHForCausalLM, avail mem=19.50 GB, mem usage=0.50 GB.
    [2026-07-23 10:00:03] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 65536, K size: 0.19 GB, V size: 0.19 GB
    [2026-07-23 10:00:03] Mamba Cache is allocated. max_mamba_cache_size: 48, conv_state size: 0.01GB, ssm_state size: 0.20GB
    INFO:     Uvicorn running on http://127.0.0.1:31234 (Press CTRL+C to quit)
    [2026-07-23 10:00:04] The server is fired up and ready to roll!
""")


def test_startup_stages_and_figures():
    state = StartupState()
    stages = []
    for line in STARTUP.splitlines():
        state.feed(line)
        stages.append(state.stage)
    assert stages[0] == "loading weights" and stages[-1] == "ready"
    assert state.progress == 1.0 and state.ready
    f = state.figures
    assert (f["kv_tokens"], f["state_slots"], f["port"]) == (65536, 48, 31234)
    assert f["weights_gb"] == 0.5 and f["model_class"] == "NemotronHForCausalLM"


def test_the_cpu_decode_compile_is_a_stage_of_its_own():
    state = StartupState()
    state.feed("[2026-12-02 10:00:01] Mamba Cache is allocated. max_mamba_cache_size: 9, conv_state size: 0.00GB")
    state.feed("[2026-12-02 10:00:01] CPU: compiling the decode step with torch.compile for 1 to 8 requests (...)")
    assert state.stage == "compiling the decode step" and 0.8 < state.progress < 0.9
    state.feed("[2026-12-02 10:01:30] CPU: decode step compiled in 88.51 s (batch size and context length dynamic)")
    assert state.stage == "decode step compiled" and state.figures["cpu_compile_seconds"] == 88.51
    failed = StartupState()
    failed.feed("CPU: compiling the decode step failed (RuntimeError: no C++ compiler); decode steps run eagerly")
    assert failed.stage == "decode step compiled" and "cpu_compile_seconds" not in failed.figures
    loaded = StartupState()  # a later start loads the step the first one saved
    loaded.feed("CPU: decode step loaded in 4.18 s: loaded from /c/bringup_decode_steps/k.bin (batch size ...)")
    assert loaded.stage == "decode step compiled" and loaded.figures["cpu_compile_seconds"] == 4.18


def test_stage_never_moves_back():
    state = StartupState()
    state.feed("The server is fired up and ready to roll!")
    state.feed("Load weight begin. avail mem=1 GB")
    assert state.stage == "ready"


@pytest.mark.parametrize("line,severity", [
    ("Traceback (most recent call last):", "error"),
    ("ValueError: layer_id=0 not in full attention layers: dict_keys([5, 12])", "error"),
    ("[2026-07-23 10:00:00] WARNING max_running_requests is capped to 48", "warning"),
    ("[2026-07-23 10:00:00] Decode batch, #running-req: 3", "info"),
])
def test_line_severity(line, severity):
    assert line_severity(line) == severity


PARENT = textwrap.dedent("""\
    import subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    print("child", child.pid, flush=True)
    time.sleep(60)
""")


def _wait_for(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_stop_ends_the_whole_tree():
    proc = EngineProcess([sys.executable, "-c", PARENT])
    proc.start()
    assert _wait_for(lambda: any(l.startswith("child ") for l in proc.lines))
    child_pid = int(next(l for l in proc.lines if l.startswith("child ")).split()[1])
    assert psutil.pid_exists(child_pid)
    proc.stop(timeout=3)
    assert not proc.running
    assert _wait_for(lambda: not psutil.pid_exists(child_pid) or psutil.Process(child_pid).status() == psutil.STATUS_ZOMBIE)


def test_crash_gives_exit_code_and_last_lines():
    seen = []
    proc = EngineProcess([sys.executable, "-c", "import sys; print('boom', flush=True); sys.exit(3)"], on_line=seen.append)
    proc.start()
    assert _wait_for(lambda: proc.poll() is not None)
    proc.wait_log_drained()
    assert proc.poll() == 3
    assert proc.tail(5) == ["boom"] and seen == ["boom"]


def test_free_port_is_bindable():
    import socket

    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_demo_profile_default_and_errors(tmp_path):
    from bringup.core.client.demo_profile import load_profile
    from bringup.core.errors import UserError

    profile = load_profile()
    assert profile.model and profile.prompts and profile.concurrency >= 1
    bad = tmp_path / "p.json"
    bad.write_text('{"model": "default", "prompts": []}')
    with pytest.raises(UserError, match="prompts"):
        load_profile(bad)
    bad.write_text('{"model": "default", "prompts": ["hi"], "device": "tpu"}')
    with pytest.raises(UserError, match="device"):
        load_profile(bad)
    bad.write_text("{not json")
    with pytest.raises(UserError, match="not valid JSON"):
        load_profile(bad)
    with pytest.raises(UserError, match="does not exist"):
        load_profile(tmp_path / "missing.json")


def test_session_report_is_self_contained(tmp_path):
    from bringup.core.session_report import SessionRecord, write_report

    record = SessionRecord(
        model={"name": "tiny <model>", "layers": 52},
        images={"Layer map": b"\x89PNG fake"},
        findings=[{"severity": "error", "code": "layer-index", "message": "layer 0 <not> KV", "layers": [0]}],
        chats=[{"prompt": "hi", "answer": "hello", "ttft_s": 0.12, "tok_s": 30.0}],
        log_tail=["line <1>"],
    )
    out = write_report(record, tmp_path / "r.html")
    text = out.read_text()
    assert "data:image/png;base64," in text and "tiny &lt;model&gt;" in text and "line &lt;1&gt;" in text
    assert [p.name for p in tmp_path.iterdir()] == ["r.html"]  # no temp file left behind


def test_chat_timing_figures():
    from bringup.core.client.chat import AnswerTiming

    t = AnswerTiming(tokens=11, ttft_s=0.5, total_s=1.5)
    assert t.tok_s == pytest.approx(11 / 1.5) and t.decode_tok_s == pytest.approx(10.0)
    assert AnswerTiming().tok_s is None and AnswerTiming(tokens=1, ttft_s=0.1, total_s=0.1).decode_tok_s is None

