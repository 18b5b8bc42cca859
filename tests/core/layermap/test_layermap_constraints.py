"""Configs whose sizes the engine's modules cannot be built with (issue 34's cases: KV heads 3 for 4
attention heads, top-k above the experts, Mamba heads 7 with 2 groups, chunk_size 0, a context of
1; expert groups that do not split the experts, gated DeltaNet value heads not a multiple of its key heads, a text_config nested 900 deep) are
refused with the field to fix, the same way by inspect, validate, plan and the engine's build,
never with a traceback at serve's warm-up."""

from __future__ import annotations

import json

import pytest

from bringup.cli import main
from bringup.core.errors import UserError
from bringup.core.families import build_layer_map
from bringup.core.layermap.constraints import map_problems
from bringup.core.rules import LaunchSettings
from bringup.core.sources.default_model import TINY_TEST_SPEC, build_config
from bringup.core.validate import validate

transformers = pytest.importorskip("transformers")

BASE = build_config(TINY_TEST_SPEC, 96).to_dict()  # the bundled tiny NemotronH, as config.json holds it
CASES = {
    "kv_heads": (dict(num_attention_heads=4, num_key_value_heads=3), "num_key_value_heads"),
    "top_k": (dict(num_experts_per_tok=BASE["n_routed_experts"] + 1), "num_experts_per_tok"),
    "mamba_groups": (dict(mamba_num_heads=7, n_groups=2), "n_groups"),
    "chunk_size": (dict(chunk_size=0), "chunk_size"),
    "context": (dict(max_position_embeddings=1), "max_position_embeddings"),
    # Grouped routing: 4 experts in 3 groups, or 3 groups searched of 2.
    "routing_groups": (dict(n_group=3), "n_group"),
    "topk_groups": (dict(n_group=2, topk_group=3), "topk_group"),
}


def _write(tmp_path, config: dict):
    (tmp_path / "config.json").write_text(json.dumps(config))
    return str(tmp_path)


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_inconsistent_size_is_found_once_naming_its_field(case):
    extra, field = CASES[case]
    problems = map_problems(build_layer_map(dict(BASE, **extra), name=case))
    assert [p.field for p in problems] == [field]
    assert field in problems[0].message


def test_the_consistent_config_and_every_shared_config_have_no_problems():
    from layermap_helpers import shared_config, shared_files

    assert map_problems(build_layer_map(BASE)) == []
    for path in shared_files():
        assert map_problems(build_layer_map(shared_config(path.name))) == [], path.name


@pytest.mark.parametrize("case", sorted(CASES))
def test_validate_and_inspect_report_it_and_the_engine_refuses_to_build_it(case, tmp_path, capsys):
    import torch

    from bringup.core.engine.models import ModelSizeError, model_class_for
    from bringup.kernels.dispatch import ops_for

    extra, field = CASES[case]
    config = dict(BASE, **extra)
    layer_map = build_layer_map(config, name=case)
    result = validate(layer_map, "embedded", LaunchSettings(device="cpu"))
    assert not result.ok and result.first_error.code == "CONFIG_SIZES" and field in result.first_error.fix
    other = validate(layer_map, "sglang", LaunchSettings(device="cuda"))
    assert any(f.code == "CONFIG_SIZES" and f.severity == "warning" for f in other.findings)

    folder = _write(tmp_path, config)
    assert main(["inspect", folder, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [f["code"] for f in doc["findings"]] == ["CONFIG_SIZES"] and field in doc["findings"][0]["fix"]
    assert main(["validate", folder, "--target", "embedded", "--device", "cpu"]) == 1
    capsys.readouterr()

    with pytest.raises(ModelSizeError, match=field), torch.device("meta"):
        model_class_for(config)(config, ops_for("cpu"), layer_map)


def test_gated_delta_net_value_heads_must_be_a_multiple_of_its_key_heads():
    cfg = transformers.Qwen3NextConfig(num_hidden_layers=4, linear_num_key_heads=4, linear_num_value_heads=6).to_dict()
    problems = map_problems(build_layer_map(cfg))
    assert [p.field for p in problems] == ["linear_num_key_heads"] and problems[0].layers == (0, 1, 2)


def test_a_text_config_nested_900_deep_is_refused_with_a_message_not_a_recursion_error(tmp_path, capsys):
    from bringup.core.engine.loader import read_model_config

    nested: dict = dict(BASE)
    for _ in range(900):
        nested = {"text_config": nested}
    folder = _write(tmp_path, nested)
    with pytest.raises(UserError, match=r"nests objects 90\d deep \(text_config\.text_config"):
        read_model_config(tmp_path)  # what serve reads before it builds the engine
    assert main(["inspect", folder]) == 2
    assert "deep (text_config.text_config" in capsys.readouterr().err


def test_serves_warmup_failure_names_the_context_field():
    from bringup.core.engine.request import RequestRejected
    from bringup.core.serve.launch import warmup_failure

    err = RequestRejected("the prompt has 3 tokens but the model's context is 2; shorten the prompt")
    text = warmup_failure(err, 3, 2)
    assert "max_position_embeddings" in text and "RequestRejected" in text
    assert "report it" in warmup_failure(RuntimeError("boom"), 1, 4096)
