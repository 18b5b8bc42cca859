"""The Engine (scheduler, chunked prefill, queueing, decode through the graph path) on tiny random
Granite-4.0-H, Zamba2 and Jamba checkpoints: greedy ids equal transformers', and afterwards the pools
hold nothing but the graphs' scratch page and slot."""

from __future__ import annotations

import pytest
import torch
from models_helpers import gated_norm_reference_problem, hf_greedy, randomize
from test_engine_decode_graphs import ReplayStandIn
from hybrid_configs import VARIANTS

from bringup.core.engine.decode_graphs import PADDING_OWNER
from bringup.core.engine.config import EngineConfig
from bringup.core.engine.engine import Engine
from bringup.core.engine.sampling import SamplingParams

pytestmark = pytest.mark.slow  # runs a real engine
transformers = pytest.importorskip("transformers")
NEW = 4


@pytest.fixture(scope="module")
def tokenizer():
    from bringup.core.sources.default_model import build_tokenizer

    return build_tokenizer(256)


@pytest.mark.parametrize("name", ["granite_moe", "zamba2", "jamba"])
def test_engine_greedy_with_graph_decode_equals_transformers(name, tokenizer, tmp_path):
    config_cls, model_cls, kwargs = VARIANTS[name]
    config = getattr(transformers, config_cls)(**dict(kwargs, vocab_size=len(tokenizer)))
    torch.manual_seed(0)
    hf = getattr(transformers, model_cls)(config).eval()
    randomize(hf, seed=6)
    if problem := gated_norm_reference_problem(hf):
        pytest.skip(problem)
    hf.save_pretrained(str(tmp_path))
    tokenizer.save_pretrained(str(tmp_path))
    g = torch.Generator().manual_seed(2)
    prompts = [torch.randint(3, len(tokenizer), (n,), generator=g).tolist() for n in (13, 3, 9, 1)]
    expected = [hf_greedy(hf, p, NEW - 1)[0] for p in prompts]

    engine = Engine(EngineConfig(str(tmp_path), device="cpu", max_running_requests=3, chunked_prefill_size=8,
                                 cuda_graphs=True),  # captured at start-up: its own padding slot
                    log=lambda m: None, graph_factory=ReplayStandIn)
    before = ReplayStandIn.replays
    assert engine.generate(prompts, SamplingParams(max_new_tokens=NEW, temperature=0, ignore_eos=True)) == expected
    assert ReplayStandIn.replays > before  # decode steps went through the graph path
    engine.check_pools()
    pages, slots = engine.scheduler.owners()
    assert list(pages) == [PADDING_OWNER] and list(slots) == [PADDING_OWNER]
