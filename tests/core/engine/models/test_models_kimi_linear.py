"""Our Kimi-Linear (KDA + MLA over a latent KV pool + sigmoid-routed MoE with shared experts)
against transformers' on a tiny random-weight checkpoint (fp32, CPU): logits after every prefill
and decode step, greedy tokens, batched requests of different lengths joining at different steps,
chunked prompts; the 1-based layer lists of the config; the pools shaped per mixer kind."""

from __future__ import annotations

import pytest
import torch
from models_helpers import DEVICE, Req, assert_matches_hf, randomize, run_engine, standard_requests

from bringup.core.engine.loader import load_model
from tiny_family_configs import tiny_kimi_config

transformers = pytest.importorskip("transformers")

VOCAB = 96


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    torch.manual_seed(0)
    hf = transformers.KimiLinearForCausalLM(tiny_kimi_config()).eval()
    randomize(hf, seed=3)
    with torch.no_grad():  # decays in Kimi's trained range: some channels forget fast, some slowly
        for layer in hf.model.layers:
            gate = getattr(layer.self_attn, "forget_gate", None)
            if gate is not None:
                gate.A_log.copy_(torch.linspace(-1.0, 1.0, gate.A_log.numel()).view_as(gate.A_log))
    folder = tmp_path_factory.mktemp("kimi_linear")
    hf.save_pretrained(str(folder))
    return hf, folder


def test_batched_chunked_and_staggered_requests_match_transformers(checkpoint):
    hf, folder = checkpoint
    model = load_model(folder, device=DEVICE).model
    assert_matches_hf(hf, run_engine(model, standard_requests(VOCAB)))


def test_a_long_prompt_in_chunks_with_one_token_steps_matches(checkpoint):
    hf, folder = checkpoint
    model = load_model(folder, device=DEVICE).model
    prompt = torch.randint(3, VOCAB, (45,), generator=torch.Generator().manual_seed(5)).tolist()
    assert_matches_hf(hf, run_engine(model, [Req(prompt, [33, 1, 11], steps=3)]))  # crosses a KDA chunk


def test_layers_and_pools_follow_the_one_based_config(checkpoint):
    hf, folder = checkpoint
    model = load_model(folder, device=DEVICE).model
    assert [l.mixer for l in model.layer_map.layers] == ["kimi_delta_attention", "attention", "kimi_delta_attention",
                                                         "kimi_delta_attention", "attention"]
    assert [l.ffn for l in model.layer_map.layers] == ["mlp", "moe", "moe", "moe", "moe"]
    spec = model.cache_spec
    assert spec.kv_layer_ids == (1, 4) and spec.state_layer_ids == (0, 2, 3)
    # KDA: one conv window over q|k|v and a [heads, d, d] state; MLA: one latent vector per token.
    assert spec.conv_shape == (3 * 2 * 8, 3) and spec.ssm_shape == (2, 8, 8)
    assert (spec.num_kv_heads, spec.head_dim, spec.latent_kv, spec.v_head_dim) == (1, 12 + 4, True, 12)
    layer = model.layer_map.layers[1]
    assert layer.kv_elems_per_token == 16  # what the planner counts is what the pool holds


def test_latent_pool_holds_one_vector_per_token():
    from bringup.core.engine.pools import KVPool

    pool = KVPool(4, 8, (1, 4), 1, 16, dtype="float32", latent=True, v_head_dim=12)
    assert pool.v(1) is not None and pool.v(1).data_ptr() == pool.k(1).data_ptr()
    assert pool.v_bytes == 0 and pool.bytes_per_token == 2 * 16 * 4 == pool.k_bytes // (4 * 8)


def test_rope_in_mla_is_refused_with_the_reason(tmp_path):
    import json

    from bringup.core.errors import UserError

    hf = transformers.KimiLinearForCausalLM(tiny_kimi_config())
    hf.save_pretrained(str(tmp_path))
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg["mla_use_nope"] = False
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(UserError, match="mla_use_nope"):
        load_model(tmp_path, device=DEVICE)


def test_engine_pools_are_what_the_planner_counts(checkpoint):
    """The latent KV pool and the KDA slots take exactly the bytes the planner's layer map says."""
    from bringup.core.engine.config import EngineConfig
    from bringup.core.engine.engine import Engine

    _, folder = checkpoint
    engine = Engine(EngineConfig(str(folder), device=DEVICE, load_format="dummy", max_running_requests=2),
                    log=lambda m: None)
    assert engine.kv_pool.latent and engine.kv_pool.v_bytes == 0
    assert engine.kv_pool.bytes_per_token == engine.plan.kv_bytes_per_token == 2 * (12 + 4) * 4
    assert engine.state_pool.bytes_per_slot == engine.plan.state_bytes_per_request


_GPU_OP_SET = """
import sys, torch
sys.path[:0] = {paths!r}
from models_helpers import assert_matches_hf, run_engine, standard_requests
import transformers
from bringup.core.bench.launch_count import gpu_weight_layout, use_gpu_ops_on_cpu
from bringup.core.engine.loader import load_model
use_gpu_ops_on_cpu()  # the GPU's Triton ops interpreted, q/k/v and gate/up stacked
hf = transformers.KimiLinearForCausalLM.from_pretrained({folder!r}).eval()
with gpu_weight_layout():
    model = load_model({folder!r}, device="cpu").model
assert_matches_hf(hf, run_engine(model, standard_requests({vocab})), atol=1e-4)
print("ok")
"""


def test_the_gpu_op_set_interpreted_matches_transformers(checkpoint):
    """KDA's stacked q/k/v and convs, its o_norm as one sigmoid-gated float32 gated_rms_norm, the router's
    float32 logits in one launch, stacked gate/up, the routed parts summed in the next residual add: the
    GPU's wiring, its Triton kernels under the interpreter."""
    import sys

    from triton_interpreter import assert_interpreted_ok

    pytest.importorskip("triton")
    hf, folder = checkpoint
    assert_interpreted_ok(_GPU_OP_SET.format(paths=[p for p in sys.path if p.endswith("helpers")], folder=str(folder),
                                             vocab=VOCAB))
