"""bench/step_profile.py on a CPU engine (a small Qwen3, dummy weights): each op of a decode step is
charged to the innermost module it ran under, layer indices folded, every op in both tables, and a
module's bytes are its weights once per step, however many steps were profiled."""

from __future__ import annotations

import json
import sys

import pytest

from repo_paths import REPO

LAYERS, HIDDEN, VOCAB = 3, 64, 256


def _engine(tmp_path):
    from bringup.core.engine.config import EngineConfig
    from bringup.core.engine.engine import Engine

    config = {"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"], "hidden_size": HIDDEN,
              "intermediate_size": 96, "num_hidden_layers": LAYERS, "num_attention_heads": 4, "num_key_value_heads": 2,
              "head_dim": 16, "vocab_size": VOCAB, "rms_norm_eps": 1e-6, "max_position_embeddings": 1024,
              "rope_theta": 10000.0, "tie_word_embeddings": False, "hidden_act": "silu", "bos_token_id": 1,
              "eos_token_id": 2}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return Engine(EngineConfig(str(path), device="cpu", dtype="float32", load_format="dummy", max_running_requests=2,
                               context_length=128, cpu_compile=False, warmup=False), log=lambda m: None)


@pytest.fixture(scope="module")
def step_profile():
    sys.path.insert(0, str(REPO / "bench"))
    import step_profile

    return step_profile


def test_ops_go_to_the_innermost_module_and_bytes_count_once_per_step(tmp_path, step_profile):
    engine = _engine(tmp_path)
    one = step_profile.profile_decode_step(engine, batch=2, steps=1)
    three = step_profile.profile_decode_step(engine, batch=2, steps=3)
    for result in (one, three):
        modules = {pattern: (n, us, b) for pattern, n, us, b in result["modules"]}
        assert not any(ch.isdigit() for pattern in modules for ch in pattern)  # layers.*.x, not layers.0.x
        assert result["charged_share"] == pytest.approx(1.0)  # every CPU leaf op is charged somewhere
        # both tables hold every op of the step
        assert sum(n for _, n, _, _ in result["kernels_by_name"]) == pytest.approx(result["kernels"])
        assert sum(n for n, _, _ in modules.values()) == pytest.approx(result["kernels"])
        # the LM head's product is its own (not its parent's), its weight read once per step
        assert modules["lm_head"][0] >= 1 and modules["lm_head"][2] == VOCAB * HIDDEN * 4
        heads = [p for p in modules if p.startswith("layers.*.")]
        assert heads, modules
        for pattern in heads:  # the same ops in each of the layers
            assert modules[pattern][0] % LAYERS == 0, (pattern, modules[pattern])
        assert modules.get("embed_tokens", (0, 0, None))[2] is None  # an embedding reads a few rows only
    assert one["kernels"] == pytest.approx(three["kernels"])  # per step, not per profile
    assert dict((p, b) for p, _, _, b in one["modules"]) == dict((p, b) for p, _, _, b in three["modules"])
    text = step_profile.describe(three, graphed_ms=None, top=4, top_modules=3)
    assert len(text.splitlines()) == 1 + 1 + 4 + 1 + 3  # the split, then two headed tables (no graph on a CPU)


def test_kernel_names_are_cut_to_what_tells_them_apart(step_profile):
    name = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
            "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)")
    assert step_profile.short_name(name, width=200) == "vectorized_elementwise_kernel<4, FillFunctor<float>, array<char*, 1ul> >"
    assert step_profile.short_name("_gated_up_kernel") == "_gated_up_kernel"
    assert len(step_profile.short_name(name, width=20)) == 20
    assert step_profile.module_pattern("model.layers.12.self_attn.o_proj") == "layers.*.self_attn.o_proj"
    assert step_profile.module_pattern("") == "(model)"
