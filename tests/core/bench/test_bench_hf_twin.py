"""The bench's transformers twin (core/bench/hf_twin.py) runs the engine's own dummy weights for every
family with a tiny config: Gemma's `embed_scale` buffer (built from sizes, not from the config) is
computed again through transformers' own initialisation, and the norms the engine holds as 1 + w are
handed back as w; Falcon-H1's mup_vector (set by its parent model) likewise, and its multipliers,
folded into the engine's weights, are not applied twice; Granite-MoE's and Jamba's experts, fused and
renamed by transformers at load, are filled through transformers' own reversal of that conversion;
Zamba2's per-use copies of its shared blocks are tied again. The engine's weights are perturbed
first, so norms that are not all 1 matter; a one-token prompt is among the prompts (where Falcon-H1's
doubled multipliers showed)."""

from __future__ import annotations

import pytest
import torch

from bringup.core.bench.hf_twin import transformers_twin
from bringup.core.engine.config import EngineConfig
from bringup.core.engine.engine import Engine
from bringup.core.engine.sampling import SamplingParams

from family_checkpoints import FAMILIES, family_config

pytest.importorskip("transformers")
VOCAB = 96


@pytest.mark.parametrize("name", FAMILIES)
def test_the_twin_generates_the_engine_tokens_on_dummy_weights(name, tmp_path):
    family_config(name, VOCAB).save_pretrained(str(tmp_path))
    engine = Engine(EngineConfig(str(tmp_path), device="cpu", dtype="float32", load_format="dummy",
                                 cpu_compile=False, max_running_requests=2), log=lambda m: None)
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for pname, param in engine.model.named_parameters():
            scale = 0.3 if "norm" in pname else 0.05
            param.add_(torch.randn(param.shape, generator=g).to(param.dtype) * scale)
    twin = transformers_twin(engine.model, engine.config, torch.device("cpu"), torch.float32)
    if name.startswith("gemma"):
        scale = dict(twin.named_buffers())["model.embed_tokens.embed_scale"]
        assert scale.item() == pytest.approx(engine.config["hidden_size"] ** 0.5)
    prompts = [[5, 6, 7, 8, 9, 10, 11, 12, 13, 14], [9, 10], [9]]
    outs = engine.generate(prompts, SamplingParams(max_new_tokens=4, temperature=0, ignore_eos=True))
    twin_outs = []
    for prompt in prompts:  # greedy through transformers' full forward, no cache
        seq = list(prompt)
        for _ in range(4):
            with torch.no_grad():
                seq.append(int(twin(torch.tensor([seq])).logits[0, -1].argmax()))
        twin_outs.append(seq[len(prompt):])
    assert twin_outs == outs
