"""`bringup serve` end to end on CPU: one server process on a tiny NemotronH checkpoint for all tests."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time

import httpx
import pytest

from server_helpers import API_KEY, wait_idle

pytestmark = pytest.mark.slow  # starts a real engine or server


@pytest.fixture
def client(server):
    with httpx.Client(base_url=server.base_url, headers=server.headers(), timeout=60) as c:
        yield c


def openai_client(server):
    import openai

    return openai.OpenAI(base_url=server.base_url + "/v1", api_key=API_KEY, max_retries=0)


def completion_tokens(client, body: dict) -> tuple[str, dict]:
    r = client.post("/v1/completions", json=body)
    assert r.status_code == 200, r.text
    data = r.json()
    return data["choices"][0]["text"], data["usage"]


# ---- start-up ------------------------------------------------------------------------------------


def test_startup_lines_parse_like_sglang(server):
    from bringup.core.client.startup_log import StartupState

    state = StartupState()
    for line in server.log.splitlines():
        state.feed(line)
    assert state.ready
    assert state.figures["port"] == int(server.base_url.rsplit(":", 1)[1])
    assert state.figures["kv_tokens"] > 0 and state.figures["state_slots"] > 0
    assert state.figures["max_running_requests"] == 4
    assert state.figures["max_total_num_tokens"] == state.figures["kv_tokens"]


def test_server_info_reports_predicted_and_allocated_pools(client):
    info = client.get("/server_info").json()
    assert info["kv_layers"] == [1, 4] and info["state_layers"] == [0, 3]  # M*EM*E-
    assert info["predicted"]["kv_tokens"] >= info["allocated"]["kv_tokens"] > 0
    assert info["allocated"]["state_slots"] >= 4
    assert info["device"] == "cpu" and info["pools_check"] == "ok"
    model = client.get("/model_info").json()
    assert model["model_type"] == "nemotron_h" and model["architectures"] == ["NemotronHForCausalLM"]
    assert client.get("/ready").json() == {"status": "ok"}


# ---- OpenAI API ----------------------------------------------------------------------------------


def test_openai_client_completion_chat_and_models(server):
    oc = openai_client(server)
    ids = [m.id for m in oc.models.list().data]
    assert ids == [server.checkpoint.name]
    comp = oc.completions.create(model="default", prompt="The engine keeps", max_tokens=5, temperature=0,
                                 extra_body={"ignore_eos": True})
    assert comp.choices[0].finish_reason == "length"
    assert comp.usage.completion_tokens == 5 and comp.usage.prompt_tokens > 0
    chat = oc.chat.completions.create(model="default", messages=[{"role": "user", "content": "What is a KV cache?"}],
                                      max_tokens=4, temperature=0, extra_body={"ignore_eos": True})
    assert chat.choices[0].message.role == "assistant"
    assert chat.usage.completion_tokens == 4


def test_openai_streaming_matches_the_whole_answer(server):
    oc = openai_client(server)
    kwargs = dict(model="default", max_tokens=12, temperature=0, extra_body={"ignore_eos": True})
    whole = oc.completions.create(prompt="Memory pools", **kwargs).choices[0].text
    pieces = [c.choices[0].text for c in oc.completions.create(prompt="Memory pools", stream=True, **kwargs)
              if c.choices]
    assert "".join(pieces) == whole and len(pieces) > 1

    messages = [{"role": "user", "content": "hello"}]
    whole = oc.chat.completions.create(messages=messages, **kwargs).choices[0].message.content
    chunks = list(oc.chat.completions.create(messages=messages, stream=True,
                                             stream_options={"include_usage": True}, **kwargs))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole
    assert chunks[-1].usage.completion_tokens == 12
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"


def test_continuous_usage_stats_put_the_usage_so_far_on_every_chunk(server, client):
    oc = openai_client(server)
    chunks = list(oc.completions.create(
        model="default", prompt="Memory pools", max_tokens=10, temperature=0, stream=True,
        stream_options={"include_usage": True, "continuous_usage_stats": True}, extra_body={"ignore_eos": True}))
    counted = [c.usage.completion_tokens for c in chunks if c.choices]
    assert counted and all(c.usage is not None for c in chunks)
    assert counted == sorted(counted) and counted[-1] == 10 == chunks[-1].usage.completion_tokens
    assert chunks[-1].usage.prompt_tokens == chunks[0].usage.prompt_tokens > 0
    r = client.post("/v1/completions", json={"prompt": "x", "stream": True,
                                             "stream_options": {"continuous_usage_stats": True}})
    assert r.status_code == 400 and "include_usage" in r.json()["error"]["message"]


def test_curl_style_completion_with_token_prompt(client):
    text, usage = completion_tokens(client, {"prompt": [5, 6, 7, 8], "max_tokens": 3, "temperature": 0,
                                             "ignore_eos": True})
    assert usage == {"prompt_tokens": 4, "completion_tokens": 3, "total_tokens": 7}


def test_stop_strings_end_the_text_before_them(client):
    body = {"prompt": "Stop strings", "max_tokens": 16, "temperature": 0, "ignore_eos": True}
    whole, _ = completion_tokens(client, body)
    stop = whole[len(whole) // 2:len(whole) // 2 + 2]
    assert stop.strip(), whole
    cut = whole[:whole.find(stop)]
    r = client.post("/v1/completions", json={**body, "stop": [stop]}).json()
    assert r["choices"][0]["text"] == cut and r["choices"][0]["finish_reason"] == "stop"
    streamed = []
    with client.stream("POST", "/v1/completions", json={**body, "stop": stop, "stream": True}) as resp:
        for line in resp.iter_lines():
            if line.startswith("data: {"):
                streamed += [c["text"] for c in json.loads(line[6:])["choices"]]
    assert "".join(streamed) == cut


def test_a_seed_makes_sampling_repeatable(client):
    body = {"prompt": "Seeds", "max_tokens": 8, "temperature": 1.0, "top_p": 0.9, "top_k": 50, "seed": 42,
            "ignore_eos": True}
    first, _ = completion_tokens(client, body)
    again, _ = completion_tokens(client, body)
    assert first == again


# ---- SGLang /generate --------------------------------------------------------------------------


def test_generate_single_list_and_text(client):
    sp = {"max_new_tokens": 6, "temperature": 0, "ignore_eos": True}
    one = client.post("/generate", json={"input_ids": [5, 6, 7], "sampling_params": sp}).json()
    assert len(one["output_ids"]) == 6 and isinstance(one["text"], str)
    assert one["meta_info"]["finish_reason"] == {"type": "length"}
    assert one["meta_info"]["prompt_tokens"] == 3 and one["meta_info"]["completion_tokens"] == 6

    many = client.post("/generate", json={"input_ids": [[5, 6, 7], [9, 10, 11, 12, 13]], "sampling_params": sp}).json()
    assert isinstance(many, list) and len(many) == 2
    assert many[0]["output_ids"] == one["output_ids"]  # batched with another request: same greedy tokens
    assert [m["meta_info"]["prompt_tokens"] for m in many] == [3, 5]

    named = client.post("/generate", json={"input_ids": [[5], [6]], "rid": ["mine-1", "mine-2"], "sampling_params": sp})
    assert [m["meta_info"]["id"] for m in named.json()] == ["mine-1", "mine-2"]

    by_text = client.post("/generate", json={"text": ["Hello there", "General Kenobi"],
                                             "sampling_params": [sp, {**sp, "max_new_tokens": 2}]}).json()
    assert [len(m["output_ids"]) for m in by_text] == [6, 2]


def test_generate_streaming_is_cumulative(client):
    body = {"input_ids": [5, 6, 7], "stream": True, "sampling_params": {"max_new_tokens": 5, "temperature": 0,
                                                                          "ignore_eos": True}}
    events = []
    with client.stream("POST", "/generate", json=body) as r:
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                events.append(json.loads(line[6:]))
    # Cumulative: each event repeats what came before and adds to it (a loop turn may carry several
    # tokens at once: the stream batches what is ready), ending at all five.
    lengths = [len(e["output_ids"]) for e in events]
    assert lengths == sorted(set(lengths)) and lengths[-1] == 5, lengths
    for before, after in zip(events, events[1:]):
        assert after["output_ids"][: len(before["output_ids"])] == before["output_ids"]
    assert events[-1]["meta_info"]["finish_reason"] == {"type": "length"}
    whole = client.post("/generate", json={**body, "stream": False}).json()
    assert events[-1]["output_ids"] == whole["output_ids"] and events[-1]["text"] == whole["text"]


def test_greedy_output_equals_transformers(server, client):
    import torch
    from transformers import AutoModelForCausalLM

    prompts = [[5, 17, 33, 8, 90, 12, 7], [44, 3, 101]]
    n = 10
    got = client.post("/generate", json={"input_ids": prompts, "sampling_params": {
        "max_new_tokens": n, "temperature": 0, "ignore_eos": True}}).json()
    model = AutoModelForCausalLM.from_pretrained(server.checkpoint, dtype=torch.float32).eval()
    model.generation_config.eos_token_id = None  # like ignore_eos
    for prompt, answer in zip(prompts, got):
        with torch.inference_mode():
            out = model.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                                 max_new_tokens=n, do_sample=False)
        assert answer["output_ids"] == out[0, len(prompt):].tolist()


# ---- load, metrics, pools ----------------------------------------------------------------------


async def _stream_completion(base_url: str, max_tokens: int) -> tuple[int, str | None, int]:
    """(usage.completion_tokens, finish_reason, content chunks) of one streaming completion."""
    body = {"prompt": f"request of {max_tokens} tokens", "max_tokens": max_tokens, "temperature": 0.8,
            "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
    usage, reason, chunks = None, None, 0
    async with httpx.AsyncClient(base_url=base_url, headers={"Authorization": f"Bearer {API_KEY}"},
                                 timeout=120) as c:
        async with c.stream("POST", "/v1/completions", json=body) as r:
            assert r.status_code == 200
            async for line in r.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                event = json.loads(line[6:])
                if event.get("usage"):
                    usage = event["usage"]["completion_tokens"]
                for choice in event["choices"]:
                    chunks += 1
                    reason = choice["finish_reason"] or reason
    return usage, reason, chunks


def test_many_concurrent_streams_complete_and_metrics_move(server, client):
    from bringup.core.client.metrics_scrape import MetricsReader, parse_prometheus

    before = parse_prometheus(client.get("/metrics").text)
    reader, seen = MetricsReader(), []
    stop = threading.Event()

    def scrape():
        with httpx.Client(base_url=server.base_url, headers=server.headers(), timeout=10) as c:
            while not stop.is_set():
                seen.append(reader.sample(c.get("/metrics").text, time.monotonic()))
                time.sleep(0.02)

    scraper = threading.Thread(target=scrape)
    scraper.start()
    lengths = [8 + 3 * i for i in range(12)]  # 12 requests on 4 running slots: some must queue

    async def all_streams():
        return await asyncio.gather(*(_stream_completion(server.base_url, n) for n in lengths))

    try:
        results = asyncio.run(all_streams())
    finally:
        stop.set()
        scraper.join()
    assert [r[0] for r in results] == lengths  # nothing lost, nothing extra
    assert all(r[1] == "length" for r in results)

    info = wait_idle(client)
    assert info["stats"]["kv_tokens_used"] == 0 and info["stats"]["state_slots_used"] == 0
    assert info["pools_check"] == "ok"

    after = parse_prometheus(client.get("/metrics").text)
    assert after["bringup:generation_tokens_total"] - before["bringup:generation_tokens_total"] >= sum(lengths)
    assert after["bringup:num_requests_total"] - before["bringup:num_requests_total"] == len(lengths)
    assert after["bringup:time_to_first_token_seconds_count"] > before["bringup:time_to_first_token_seconds_count"]
    assert after["bringup:inter_token_latency_seconds_count"] > before["bringup:inter_token_latency_seconds_count"]
    assert max(s.running or 0 for s in seen) >= 1
    assert max(s.gen_tok_s or 0 for s in seen) > 0
    assert max(s.mamba_usage or 0 for s in seen) > 0 and max(s.full_token_usage or 0 for s in seen) > 0
    assert after["bringup:mamba_used_slots"] == 0 and after["bringup:num_running_reqs"] == 0


def test_bad_requests_get_4xx_and_do_not_disturb_others(server, client):
    async def scenario():
        long_run = asyncio.ensure_future(_stream_completion(server.base_url, 40))
        await asyncio.sleep(0.2)
        bad = [
            ("/v1/completions", b"{not json"),
            ("/v1/completions", json.dumps({"prompt": [999999]}).encode()),
            ("/v1/completions", json.dumps({"prompt": "x", "temperature": -1}).encode()),
            ("/v1/completions", json.dumps({"prompt": ""}).encode()),
            ("/v1/completions", json.dumps({"prompt": "x", "n": 3}).encode()),
            ("/v1/completions", json.dumps({"prompt": [5] * 5000}).encode()),  # longer than the context
            ("/v1/chat/completions", json.dumps({"messages": []}).encode()),
            ("/generate", json.dumps({"input_ids": [1, 2], "sampling_params": {"max_new_tokens": 0}}).encode()),
            ("/generate", json.dumps({"input_ids": [1, 2], "sampling_params": {"beam_width": 3}}).encode()),
            ("/generate", json.dumps({"text": "a", "input_ids": [1]}).encode()),
            ("/generate", json.dumps({"input_ids": [1], "return_logprob": True}).encode()),
            ("/generate", json.dumps({"input_ids": [[1], [2]], "rid": ["same", "same"]}).encode()),
        ]
        async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers(), timeout=30) as c:
            answers = [await c.post(path, content=body, headers={"Content-Type": "application/json"})
                       for path, body in bad]
        return await long_run, answers

    (tokens, reason, _), answers = asyncio.run(scenario())
    for r in answers:
        assert r.status_code == 400, r.text
        assert r.json()["error"]["message"]
    assert (tokens, reason) == (40, "length")
    assert client.get("/generate").status_code == 405
    assert client.get("/no/such/route").status_code == 404
    info = wait_idle(client)
    assert info["stats"]["state_slots_used"] == 0 and info["pools_check"] == "ok"


def test_a_client_that_disconnects_mid_stream_frees_its_slots(server, client):
    aborted_before = _metric(client, "bringup:num_aborted_requests_total")
    body = {"prompt": "go on forever", "max_tokens": 1500, "ignore_eos": True, "stream": True}
    with client.stream("POST", "/v1/completions", json=body) as r:
        received = 0
        for line in r.iter_lines():
            received += line.startswith("data: ")
            if received == 3:
                break  # hang up
    info = wait_idle(client)
    assert info["stats"]["kv_tokens_used"] == 0 and info["stats"]["state_slots_used"] == 0
    assert info["stats"]["generated_tokens_total"] < 10**6
    deadline = time.monotonic() + 10  # the abort is counted when the step after it reports it
    while _metric(client, "bringup:num_aborted_requests_total") < aborted_before + 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _metric(client, "bringup:num_aborted_requests_total") == aborted_before + 1


def test_a_non_streaming_client_that_gives_up_frees_its_slots(server, client):
    with pytest.raises(httpx.ReadTimeout):
        client.post("/v1/completions", json={"prompt": "wait", "max_tokens": 1500, "ignore_eos": True}, timeout=0.5)
    info = wait_idle(client)
    assert info["stats"]["state_slots_used"] == 0 and info["pools_check"] == "ok"


def test_a_real_servers_metrics_read_with_prometheus_client(client):
    """/metrics of a running server, read by prometheus_client's own parser: every family typed,
    SGLang's names, one model label, and the figures the GUI's scraper reads from the same text."""
    from prometheus_client.parser import text_string_to_metric_families

    from bringup.core.client.metrics_scrape import MetricsReader

    completion_tokens(client, {"prompt": "metrics", "max_tokens": 3, "ignore_eos": True})
    response = client.get("/metrics")
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    families = {f.name: f for f in text_string_to_metric_families(response.text)}
    assert {"gauge", "counter", "histogram"} <= {f.type for f in families.values()}
    assert families["bringup:generation_tokens"].type == "counter"
    assert families["bringup:e2e_request_latency_seconds"].type == "histogram"
    assert all(s.labels.get("model_name") for f in families.values() for s in f.samples)
    generated = families["bringup:generation_tokens"].samples[0].value
    assert generated >= 3
    sample = MetricsReader().sample(response.text, t=0.0)
    assert sample.kv_total == families["bringup:max_total_num_tokens"].samples[0].value > 0
    assert sample.requests_total == families["bringup:num_requests"].samples[0].value >= 1


def _metric(client, name: str) -> float:
    from bringup.core.client.metrics_scrape import parse_prometheus

    return parse_prometheus(client.get("/metrics").text).get(name, 0.0)


# ---- access ------------------------------------------------------------------------------------------


def test_api_key_is_enforced_except_on_health(server):
    with httpx.Client(base_url=server.base_url, timeout=10) as c:
        assert c.get("/health").status_code == 200
        assert c.get("/v1/models").status_code == 401
        r = c.post("/generate", json={"input_ids": [1]}, headers={"Authorization": "Bearer wrong"})
        assert r.status_code == 401 and "--api-key" in r.json()["error"]["message"]
        assert c.get("/metrics", headers={"Authorization": f"Bearer {API_KEY}"}).status_code == 200


def test_a_busy_port_is_a_clear_error(server):
    port = server.base_url.rsplit(":", 1)[1]
    done = subprocess.run([sys.executable, "-m", "bringup", "serve", str(server.checkpoint), "--port", port],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert f"port {port} on 127.0.0.1 is already in use" in done.stderr
    assert "Traceback" not in done.stderr


def test_health_names_its_engine_so_a_record_of_it_is_proved(server):
    """The proof a later window asks of an engine record, against a real engine: its /health names
    its pid, and a record is believed only with the port it really listens on."""
    from dataclasses import replace

    from bringup.core.client.engine_records import HEALTH_PID_HEADER, disproof, engines_dir, read_record

    pid = server.process.pid
    with httpx.Client(base_url=server.base_url, timeout=10) as c:
        assert c.get("/health").headers[HEALTH_PID_HEADER] == str(pid)
    rec, why = read_record(engines_dir() / f"{pid}.json")
    assert rec is not None, why
    assert disproof(replace(rec, url=server.base_url)) is None
    assert "not on the recorded port 1" in disproof(replace(rec, url="http://127.0.0.1:1"))
