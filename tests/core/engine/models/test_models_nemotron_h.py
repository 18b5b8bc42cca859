"""Our NemotronH against transformers' on tiny random-weight checkpoints (fp32, CPU): logits after
every prefill and decode step, greedy tokens, batched requests of different lengths joining at
different steps, and a prompt prefilled in two chunks."""

from __future__ import annotations

import json

import pytest
import torch
from models_helpers import DEVICE, Req, make_pools, randomize, run_engine, standard_requests, assert_matches_hf

from bringup.core.engine.forward_batch import ForwardBatch
from bringup.core.engine.loader import load_model
from bringup.core.engine.pools import PoolLayerError
from tiny_family_configs import NEMOTRON_H as BASE, NEMOTRON_H_VARIANTS as VARIANTS

transformers = pytest.importorskip("transformers")



@pytest.fixture(scope="module", params=sorted(VARIANTS))
def checkpoint(request, tmp_path_factory):
    torch.manual_seed(0)
    cfg = transformers.NemotronHConfig(**BASE, **VARIANTS[request.param])
    hf = transformers.NemotronHForCausalLM(cfg).eval()
    randomize(hf, seed=1)
    folder = tmp_path_factory.mktemp(f"nemotron_h_{request.param}")
    hf.save_pretrained(str(folder))
    return hf, folder


def test_batched_chunked_and_staggered_requests_match_transformers(checkpoint):
    hf, folder = checkpoint
    model = load_model(folder, device=DEVICE).model
    requests = run_engine(model, standard_requests(BASE["vocab_size"]))
    assert_matches_hf(hf, requests)


def test_single_requests_match_transformers(checkpoint):
    hf, folder = checkpoint
    model = load_model(folder, device=DEVICE).model
    g = torch.Generator().manual_seed(5)
    for n, chunks in [(9, [9]), (10, [4, 3, 3]), (10, [5, 1, 4])]:  # a one-token chunk steps the state
        prompt = torch.randint(3, BASE["vocab_size"], (n,), generator=g).tolist()
        assert_matches_hf(hf, run_engine(model, [Req(prompt, chunks, steps=4)]))


def test_cache_spec_lists_global_layer_ids_and_state_shapes(checkpoint):
    hf, folder = checkpoint
    model = load_model(folder, device=DEVICE).model
    pattern = hf.config.hybrid_override_pattern
    spec = model.cache_spec
    assert spec.kv_layer_ids == tuple(i for i, c in enumerate(pattern) if c == "*")
    assert spec.state_layer_ids == tuple(i for i, c in enumerate(pattern) if c == "M")
    conv_dim = BASE["mamba_num_heads"] * BASE["mamba_head_dim"] + 2 * BASE["n_groups"] * BASE["ssm_state_size"]
    assert spec.conv_shape == (conv_dim, BASE["conv_kernel"] - 1)
    assert spec.ssm_shape == (BASE["mamba_num_heads"], BASE["mamba_head_dim"], BASE["ssm_state_size"])
    assert (spec.num_kv_heads, spec.head_dim) == (BASE["num_key_value_heads"], BASE["head_dim"])


def test_nvidia_style_config_with_pattern_string_loads_the_same(checkpoint, tmp_path):
    """NVIDIA's own config.json spells the layers as hybrid_override_pattern and has no time_step_limit."""
    hf, folder = checkpoint
    for f in folder.iterdir():
        (tmp_path / f.name).write_bytes(f.read_bytes())
    config = json.loads((folder / "config.json").read_text())
    config["hybrid_override_pattern"] = hf.config.hybrid_override_pattern
    del config["layers_block_type"], config["time_step_limit"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    model = load_model(tmp_path, device=DEVICE).model
    assert_matches_hf(hf, run_engine(model, [Req([5, 9, 17, 3, 8], [5], steps=2)]))


def test_a_pool_without_the_layer_raises_pool_layer_error(checkpoint):
    hf, folder = checkpoint
    model = load_model(folder, device=DEVICE).model
    spec = model.cache_spec
    kv, state = make_pools(model)
    from bringup.core.engine.pools import KVPool

    wrong = KVPool(8, 4, [i + 1 for i in spec.kv_layer_ids], spec.num_kv_heads, spec.head_dim, dtype=torch.float32,
                   device=model.device)
    slot = state.alloc()
    batch = ForwardBatch.build(token_chunks=[[4, 5]], prefix_lens=[0], block_tables=[wrong.alloc(1)], page_size=4,
                               state_slots=[slot], kv_pool=wrong, state_pool=state, device=model.device)
    with pytest.raises(PoolLayerError, match=rf"layer {spec.kv_layer_ids[0]} is not in the KV pool; it holds layers"):
        model(batch)


def test_bfloat16_runs_and_stays_close_to_float32(checkpoint):
    hf, folder = checkpoint
    loaded = load_model(folder, dtype="bfloat16", device=DEVICE)
    model = loaded.model
    assert model.dtype == torch.bfloat16
    assert model.backbone.layers[model.layer_map.moe_layers[0]].mixer.gate.weight.dtype == torch.float32
    kv, state = make_pools(model, dtype=torch.bfloat16)
    requests = run_engine(model, [Req([5, 9, 17, 3, 8, 2, 40], [4, 3], steps=2)], kv_pool=kv, state_pool=state)
    reference = run_engine(load_model(folder, device=DEVICE).model, [Req([5, 9, 17, 3, 8, 2, 40], [4, 3], steps=2)])
    ours, fp32 = requests[0].logits[0], reference[0].logits[0]
    assert torch.isfinite(ours).all()
    assert torch.nn.functional.cosine_similarity(ours, fp32, dim=0) > 0.99
