"""Fuzzed sizes of a small NemotronH (heads, KV heads, Mamba heads and groups, experts and top-k,
chunk size, context): every config either is refused before loading with a message naming a field
(by the map, or by the size checks that validate reports and the engine applies at build time) or
validates, builds and generates. None ends in a traceback, and what validates serves."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from bringup.core.engine.config import EngineConfig
from bringup.core.engine.engine import Engine
from bringup.core.engine.sampling import SamplingParams
from bringup.core.errors import UserError
from bringup.core.families import build_layer_map
from bringup.core.layermap.constraints import map_problems
from bringup.core.rules import LaunchSettings
from bringup.core.validate import validate

pytest.importorskip("transformers")

def _part_of(whole: int):
    """Mostly a divisor of `whole` (a consistent config), sometimes anything (a broken one)."""
    divisors = [d for d in range(1, whole + 1) if whole % d == 0]
    return st.one_of(st.sampled_from(divisors), st.integers(1, 6))


@st.composite
def sizes(draw) -> dict:
    heads, mamba_heads, experts = draw(st.integers(1, 6)), draw(st.integers(1, 8)), draw(st.integers(1, 6))
    return {
        "num_attention_heads": heads, "num_key_value_heads": draw(_part_of(heads)),
        "mamba_num_heads": mamba_heads, "n_groups": draw(_part_of(mamba_heads)),
        "mamba_head_dim": draw(st.sampled_from([4, 8])), "n_routed_experts": experts,
        "num_experts_per_tok": draw(st.one_of(st.integers(1, experts), st.integers(0, 8))),
        "chunk_size": draw(st.one_of(st.integers(1, 8), st.just(0))),
        "max_position_embeddings": draw(st.one_of(st.integers(2, 64), st.just(1))),
    }


BASE = dict(model_type="nemotron_h", architectures=["NemotronHForCausalLM"], vocab_size=64, hidden_size=32,
            head_dim=8, intermediate_size=48, ssm_state_size=8, conv_kernel=4, moe_intermediate_size=16,
            moe_shared_expert_intermediate_size=24, hybrid_override_pattern="M*E-", n_group=1, topk_group=1,
            bos_token_id=1, eos_token_id=2, pad_token_id=0)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(drawn=sizes())
def test_a_fuzzed_config_is_refused_with_a_field_or_validates_and_serves(drawn, tmp_path_factory):
    config = dict(BASE, **drawn)
    try:
        layer_map = build_layer_map(config, name="fuzzed")
    except UserError as err:
        assert "config field" in str(err) or "config.json" in str(err)
        return
    problems = map_problems(layer_map)
    result = validate(layer_map, "embedded", LaunchSettings(device="cpu"))
    assert result.ok == (not problems), [f.code for f in result.findings if f.is_error]
    folder = tmp_path_factory.mktemp("fuzzed")
    (folder / "config.json").write_text(json.dumps(config))
    engine_config = EngineConfig(str(folder), device="cpu", dtype="float32", load_format="dummy", cpu_compile=False,
                                 max_running_requests=2)
    if problems:
        with pytest.raises(UserError, match=problems[0].field):
            Engine(engine_config, log=lambda m: None)
        return
    engine = Engine(engine_config, log=lambda m: None)
    prompt = [5, 6, 7][: max(1, config["max_position_embeddings"] - 1)]  # as serve's warm-up fits its prompt
    out = engine.generate([prompt], SamplingParams(max_new_tokens=2, temperature=0, ignore_eos=True))
    assert 1 <= len(out[0]) <= 2 and all(0 <= t < 64 for t in out[0])
