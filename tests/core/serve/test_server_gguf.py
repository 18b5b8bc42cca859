"""`bringup serve FILE.gguf` end to end: one server on a tiny quantised Llama GGUF; greedy answers
through SGLang's /generate (single and batched) and the OpenAI chat API (with the file's chat
template, streamed and whole) equal transformers loading the same file."""

from __future__ import annotations

import httpx
import pytest
import torch
from gguf_helpers import byte_level_vocab, tiny_llama, write_gguf
from server_helpers import API_KEY, start_server

pytest.importorskip("gguf")
pytest.importorskip("accelerate")  # transformers' GGUF loading, the reference
transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.slow  # starts a real engine or server


@pytest.fixture(scope="module")
def gguf_path(tmp_path_factory):
    tokens, merges = byte_level_vocab()
    return write_gguf(tiny_llama(len(tokens)), tmp_path_factory.mktemp("serve_gguf") / "tiny-llama.Q.gguf", tokens, merges)


@pytest.fixture(scope="module")
def server(gguf_path):
    # float32: dequantised at load, so greedy tokens can equal transformers' float32 reading exactly
    # (with the default, auto, the blocks stay blocks and run in bf16: tests/core/engine/test_engine_gguf_blocks.py)
    srv = start_server(gguf_path, "--max-running-requests", "4", "--model-aliases", "tiny",  # the name the chat test asks for
                       "--dtype", "float32")
    yield srv
    srv.process.stop()


@pytest.fixture(scope="module")
def reference(gguf_path):
    model = transformers.AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name,
                                                              dtype=torch.float32).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    return model, tokenizer


def hf_greedy(model, ids: list[int], n: int, stop_at_eos: bool) -> list[int]:
    with torch.inference_mode():
        out = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                             max_new_tokens=n, do_sample=False,
                             eos_token_id=model.config.eos_token_id if stop_at_eos else None)
    return out[0, len(ids):].tolist()


def test_generate_single_and_batched_equal_transformers(server, reference):
    model, _ = reference
    prompts = [[5, 17, 33, 8, 90, 12, 7], [44, 3, 101], [250, 9]]
    n = 8
    with httpx.Client(base_url=server.base_url, headers=server.headers(), timeout=60) as c:
        batched = c.post("/generate", json={"input_ids": prompts, "sampling_params": {
            "max_new_tokens": n, "temperature": 0, "ignore_eos": True}}).json()
        single = c.post("/generate", json={"input_ids": prompts[0], "sampling_params": {
            "max_new_tokens": n, "temperature": 0, "ignore_eos": True}}).json()
        info = c.get("/server_info").json()
    expected = [hf_greedy(model, p, n, stop_at_eos=False) for p in prompts]
    assert [a["output_ids"] for a in batched] == expected
    assert single["output_ids"] == expected[0]
    assert str(info.get("model_path", "")).endswith("tiny-llama.Q.gguf")
    assert "Q4_0" in info["weights"]["dequantised_from"]  # what runs is what is shown: float32 from Q4_0 blocks


def test_openai_chat_uses_the_files_template_and_equals_transformers(server, reference):
    import openai

    model, tokenizer = reference
    messages = [{"role": "user", "content": "What does the state pool hold?"}]
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key=API_KEY, max_retries=0)
    whole = client.chat.completions.create(model="tiny", messages=messages, temperature=0, max_tokens=12)
    streamed = client.chat.completions.create(model="tiny", messages=messages, temperature=0, max_tokens=12, stream=True)
    pieces = "".join(ch.choices[0].delta.content or "" for ch in streamed if ch.choices)
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    ids = ids["input_ids"] if hasattr(ids, "keys") else ids
    assert whole.usage.prompt_tokens == len(ids)
    expected = hf_greedy(model, list(ids), 12, stop_at_eos=True)
    text = tokenizer.decode(expected, skip_special_tokens=True)
    assert whole.choices[0].message.content == text
    assert pieces == text
    assert whole.usage.completion_tokens == len(expected)
