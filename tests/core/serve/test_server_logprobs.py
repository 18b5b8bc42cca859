"""OpenAI logprobs from `bringup serve`: completions' integer `logprobs`, chat's `logprobs` +
`top_logprobs`, whole and streamed, in OpenAI's shapes, with the values transformers' float32
log_softmax gives at each greedy position; above the cap (20) a 400 that says so."""

from __future__ import annotations

import json

import httpx
import pytest

pytestmark = pytest.mark.slow  # the shared server process

PROMPT = [5, 17, 33, 8, 90, 12, 7]
N = 8


@pytest.fixture
def client(server):
    with httpx.Client(base_url=server.base_url, headers=server.headers(), timeout=60) as c:
        yield c


@pytest.fixture(scope="module")
def reference(server):
    """transformers' greedy tokens after PROMPT and the float32 log_softmax at each of them."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(server.checkpoint, dtype=torch.float32).eval()
    model.generation_config.eos_token_id = None
    with torch.inference_mode():
        out = model.generate(torch.tensor([PROMPT]), attention_mask=torch.ones(1, len(PROMPT), dtype=torch.long),
                             max_new_tokens=N, do_sample=False)[0]
        logits = model(out.unsqueeze(0)).logits[0, len(PROMPT) - 1:-1].float()
    tokenizer = AutoTokenizer.from_pretrained(server.checkpoint)
    return out[len(PROMPT):].tolist(), torch.log_softmax(logits, dim=-1), tokenizer


def _body(**extra) -> dict:
    return {"prompt": PROMPT, "max_tokens": N, "temperature": 0, "ignore_eos": True, **extra}


def test_completion_logprobs_are_the_reference_log_softmax(client, reference):
    ids, logp, tokenizer = reference
    r = client.post("/v1/completions", json=_body(logprobs=3))
    assert r.status_code == 200, r.text
    lp = r.json()["choices"][0]["logprobs"]
    assert set(lp) == {"tokens", "token_logprobs", "top_logprobs", "text_offset"}
    assert lp["tokens"] == [tokenizer.decode([i]) for i in ids]
    assert lp["token_logprobs"] == pytest.approx([logp[k, i].item() for k, i in enumerate(ids)], abs=1e-4)
    offsets = [0]
    for piece in lp["tokens"][:-1]:
        offsets.append(offsets[-1] + len(piece))
    assert lp["text_offset"] == offsets
    for k, top in enumerate(lp["top_logprobs"]):
        values, best = logp[k].topk(3)
        want = {}
        for i, v in zip(best.tolist(), values.tolist()):
            want.setdefault(tokenizer.decode([i]), v)
        assert list(top) == list(want) and list(top.values()) == pytest.approx(list(want.values()), abs=1e-4)
    for neutral in ({}, {"logprobs": None}, {"logprobs": False}):  # not asked: none
        assert client.post("/v1/completions", json=_body(**neutral)).json()["choices"][0]["logprobs"] is None
    zero = client.post("/v1/completions", json=_body(logprobs=0)).json()["choices"][0]["logprobs"]
    assert zero["token_logprobs"] == lp["token_logprobs"] and zero["top_logprobs"] == [{}] * N


def test_chat_logprobs_shape_and_streamed_chunks(client):
    body = {"messages": [{"role": "user", "content": "hello"}], "max_tokens": N, "temperature": 0,
            "ignore_eos": True, "logprobs": True, "top_logprobs": 2}
    r = client.post("/v1/chat/completions", json=body)
    assert r.status_code == 200, r.text
    content = r.json()["choices"][0]["logprobs"]["content"]
    assert len(content) == N
    for e in content:
        assert set(e) == {"token", "logprob", "bytes", "top_logprobs"}
        assert e["bytes"] == list(e["token"].encode("utf-8")) and e["logprob"] <= 0
        assert len(e["top_logprobs"]) == 2 and e["top_logprobs"][0]["logprob"] >= e["top_logprobs"][1]["logprob"]
        assert e["top_logprobs"][0]["logprob"] == pytest.approx(e["logprob"])  # greedy: the best one
    streamed = [e for chunk in _events(client, "/v1/chat/completions", {**body, "stream": True})
                for c in chunk["choices"] if c["logprobs"] for e in c["logprobs"]["content"]]
    assert streamed == content
    only = client.post("/v1/chat/completions", json={**body, "top_logprobs": None}).json()
    assert all(e["top_logprobs"] == [] for e in only["choices"][0]["logprobs"]["content"])


def test_streamed_completion_chunks_carry_the_whole_answers_logprobs(client):
    whole = client.post("/v1/completions", json=_body(logprobs=2)).json()["choices"][0]["logprobs"]
    joined = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
    chunks = 0
    for event in _events(client, "/v1/completions", _body(logprobs=2, stream=True)):
        for choice in event["choices"]:
            if choice["logprobs"]:
                chunks += 1
                for key in joined:
                    joined[key] += choice["logprobs"][key]
    assert joined == whole and chunks > 1


def _events(client, path: str, body: dict) -> list[dict]:
    with client.stream("POST", path, json=body) as r:
        assert r.status_code == 200
        return [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: {")]


@pytest.mark.parametrize("path, extra, words", [
    ("/generate", {"sampling_params": {"logprobs": 2}}, "logprobs is not a /generate parameter"),
    ("/v1/completions", {"logprobs": 21}, "logprobs=21: at most 20"),
    ("/v1/completions", {"logprobs": True}, "logprobs must be an integer from 0 to 20"),
    ("/v1/chat/completions", {"logprobs": True, "top_logprobs": 21}, "top_logprobs=21: at most 20"),
    ("/v1/chat/completions", {"top_logprobs": 3}, "top_logprobs needs logprobs: true"),
    ("/v1/chat/completions", {"logprobs": 3}, "logprobs must be true or false in chat"),
])
def test_past_the_cap_and_wrong_kinds_are_refused(client, path, extra, words):
    body = {"/v1/completions": {"prompt": "hi", "max_tokens": 2}, "/generate": {"text": "hi"},
            "/v1/chat/completions": {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}}[path]
    r = client.post(path, json={**body, **extra})
    assert r.status_code == 400 and words in r.json()["error"]["message"], r.text
