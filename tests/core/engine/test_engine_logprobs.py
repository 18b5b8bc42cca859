"""Per-token logprobs (SamplingParams.logprobs): the log_softmax of the logits the sampler picked from,
for the requests that ask and only them, in the plain loop, overlapped and with decode graphs."""

from __future__ import annotations

import pytest
import torch
from engine_helpers import prompts_of_lengths, tiny_llama
from test_engine_decode_graphs import ReplayStandIn

from bringup.core.engine.config import EngineConfig
from bringup.core.engine.engine import Engine
from bringup.core.engine.logprobs import MAX_TOP_LOGPROBS
from bringup.core.engine.sampling import InvalidSamplingParams, SamplingParams

NEW = 6


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tiny_llama(tmp_path_factory.mktemp("logprobs") / "ckpt")


def _reference_logprobs(folder, prompt: list[int], output: list[int]) -> torch.Tensor:
    """transformers' float32 log_softmax at each generated position, [len(output), vocab]."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    with torch.inference_mode():
        logits = model(torch.tensor([prompt + output])).logits[0].float()
    return torch.log_softmax(logits[len(prompt) - 1:len(prompt) - 1 + len(output)], dim=-1)


def _run(folder, prompts, params, **settings):
    extra = {"graph_factory": settings.pop("graph_factory", None)}
    engine = Engine(EngineConfig(str(folder), device="cpu", cpu_compile=False, chunked_prefill_size=8,
                                 max_running_requests=3, **settings), log=lambda m: None, **extra)
    ids = [engine.add_request(p, q) for p, q in zip(prompts, params)]
    got = {rid: ([], []) for rid in ids}
    while engine.has_unfinished():
        for out in engine.step():
            tokens, entries = got[out.request_id]
            tokens += out.token_ids
            if out.logprobs is not None:
                assert len(out.logprobs) == len(out.token_ids)  # one entry per token of the output
                entries += out.logprobs
            elif out.token_ids:
                entries.append(None)
    return [got[rid] for rid in ids]


@pytest.mark.parametrize("mode", ["plain", "overlap", "graphs"])
def test_logprobs_are_log_softmax_of_the_reference_logits(folder, mode):
    settings = {"plain": {}, "overlap": {"overlap": True},
                "graphs": {"cuda_graphs": True, "graph_factory": ReplayStandIn}}[mode]
    prompts = prompts_of_lengths([5, 19, 11], 400, seed=3)  # 19: a prompt in chunks beside decodes
    params = [SamplingParams(max_new_tokens=NEW, temperature=0, ignore_eos=True, logprobs=3),
              SamplingParams(max_new_tokens=NEW, temperature=0, ignore_eos=True),  # asks nothing
              SamplingParams(max_new_tokens=NEW, temperature=0, ignore_eos=True, logprobs=0)]
    results = _run(folder, prompts, params, **settings)
    assert all(e is None for e in results[1][1])
    for prompt, param, (tokens, entries) in zip(prompts, params, results):
        if param.logprobs is None:
            continue
        ref = _reference_logprobs(folder, prompt, tokens)
        assert [e.token for e in entries] == tokens and len(tokens) == NEW
        for row, e in zip(ref, entries):
            assert e.logprob == pytest.approx(row[e.token].item(), abs=1e-4)
            assert len(e.top) == param.logprobs
            values, ids = row.topk(param.logprobs)
            assert [i for i, _ in e.top] == ids.tolist()
            assert [v for _, v in e.top] == pytest.approx(values.tolist(), abs=1e-4)
            if e.top:  # greedy: the chosen token is the best one
                assert e.top[0][0] == e.token


def test_sampled_tokens_get_the_models_logprobs_not_the_tempered_ones(folder):
    prompt = prompts_of_lengths([7], 400, seed=5)[0]
    param = SamplingParams(max_new_tokens=4, temperature=0.7, top_k=5, seed=11, ignore_eos=True, logprobs=2)
    [(tokens, entries)] = _run(folder, [prompt], [param])
    ref = _reference_logprobs(folder, prompt, tokens)
    assert [e.logprob for e in entries] == pytest.approx([ref[i, t].item() for i, t in enumerate(tokens)], abs=1e-4)


def test_more_than_the_cap_is_refused():
    SamplingParams(logprobs=MAX_TOP_LOGPROBS)
    with pytest.raises(InvalidSamplingParams, match=f"logprobs must be <= {MAX_TOP_LOGPROBS}"):
        SamplingParams(logprobs=MAX_TOP_LOGPROBS + 1)
    with pytest.raises(InvalidSamplingParams, match="logprobs must be >= 0"):
        SamplingParams(logprobs=-1)
