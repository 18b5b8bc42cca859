"""The routing recorder sees every router the engine's families use, whatever the op is called
(gpt-oss routes through `router_topk_softmax`, the others through `route_*`): each family's tiny
config records expert ids at exactly its MoE blocks, and a run made to follow those ids (the op's
own weight formula at them) counts no flips and generates the same tokens."""

from __future__ import annotations

import json

import pytest
import torch

from bringup.core.engine.sampling import SamplingParams
from bringup.core.numerics.capture import eager_engine
from bringup.core.numerics.routing import RoutingRecorder, forced_weights, is_routing
from bringup.kernels.reference.moe_gated_experts import router_topk_softmax

from tiny_family_configs import tiny_family_configs

pytestmark = pytest.mark.slow  # an engine per family (tenths of a second each)
pytest.importorskip("transformers")

CONFIGS = [(name, config) for name, config in tiny_family_configs()
           if config.get("num_local_experts") or config.get("num_experts") or config.get("n_routed_experts")]


def test_gpt_oss_forced_weights_are_the_ops_own_at_its_own_choice():
    gen = torch.Generator().manual_seed(0)
    hidden, weight, bias = torch.randn(5, 16, generator=gen), torch.randn(6, 16, generator=gen), torch.randn(6, generator=gen)
    w, ids = router_topk_softmax(hidden, weight, bias, 2)
    assert is_routing((w, ids)) and not is_routing((w, w)) and not is_routing(w)
    assert torch.allclose(forced_weights("router_topk_softmax", (hidden, weight, bias, 2), {}, ids), w)


@pytest.mark.parametrize("name, config", CONFIGS, ids=[c[0] for c in CONFIGS])
def test_each_familys_routing_is_recorded_at_its_moe_blocks_and_can_be_followed(name, config, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(config))
    engine = eager_engine(str(tmp_path), device="cpu", dtype="float32", load_format="dummy", log=lambda m: None)
    moe_blocks = engine.layer_map.moe_layers
    assert moe_blocks, f"{name}: the tiny config has no MoE block"
    vocab = int(config["vocab_size"])
    prompt = [(7 * i) % (vocab - 3) + 3 for i in range(11)]
    params = SamplingParams(max_new_tokens=3, temperature=0, ignore_eos=True)
    with torch.inference_mode(), RoutingRecorder(engine.model) as own:
        tokens = engine.generate([prompt], params)
    routing = own.result()
    assert sorted(routing) == moe_blocks, f"{name}: routing recorded at {sorted(routing)}, MoE blocks {moe_blocks}"
    assert all(ids.shape[0] == len(prompt) + 2 for ids in routing.values())  # the prefill and two decodes
    with torch.inference_mode(), RoutingRecorder(engine.model, routing) as follows:
        again = engine.generate([prompt], params)
    assert not follows.unforceable and sum(follows.flips.values()) == 0 and sorted(follows.flips) == moe_blocks
    assert again == tokens
