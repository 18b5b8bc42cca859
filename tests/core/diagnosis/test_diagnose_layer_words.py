"""Layer names in every scheme, said in the map's words (MTP past the stack, PP stages, module paths)."""

from __future__ import annotations

import json

from bringup.core.diagnosis import diagnose
from bringup.core.diagnosis.layer_refs import refs_in_line
from bringup.core.sources.resolve import load_layer_map
from repo_paths import SHARED_MODELS

QWEN3_NEXT = SHARED_MODELS / "Qwen__Qwen3-Next-80B-A3B-Instruct.json"


def _qwen3_next(tmp_path, **extra):
    cfg = json.loads(QWEN3_NEXT.read_text())
    cfg.update(extra)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return load_layer_map(str(path))


def test_every_naming_scheme_is_read():
    schemes = {
        "layer_id=7 not in": ("layer_id", 7), "ValueError: bad layer 9": ("layer", 9),
        "KeyError: 'language_model.model.layers.20.linear_attn'": ("module_path", 20),
        "missing tensor 'blk.40.ssm_conv1d.weight'": ("blk", 40), "build_graph: il = 3": ("il", 3),
        "get_value_buffer(0)": ("pool_index", 0), "backbone.layers.1.mixer.conv1d.weight": ("module_path", 1),
    }
    for text, (scheme, layer) in schemes.items():
        refs = refs_in_line(text, 1)
        assert (refs[0].scheme, refs[0].layer) == (scheme, layer), text
    listed = refs_in_line("dict_keys([5, 12, 19])", 1)
    assert [r.layer for r in listed] == [5, 12, 19] and {r.scheme for r in listed} == {"valid_list"}
    path = refs_in_line("KeyError: 'language_model.model.layers.30.self_attn.attn'", 1)[0]
    assert path.prefix == "language_model.model." and path.module == "self_attn.attn"


def test_a_layer_past_the_decoder_stack_is_the_first_mtp_block(tmp_path):
    cfg = json.loads((SHARED_MODELS / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B.json").read_text())
    cfg["num_nextn_predict_layers"] = 1
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    layer_map = load_layer_map(str(tmp_path / "config.json"))
    assert layer_map.num_layers == 52 and layer_map.mtp_layers
    result = diagnose("KeyError: 'backbone.layers.52.mixer.q_proj.weight'", layer_map)
    (words,) = result.reading.layers
    assert words.mtp and "past" in words.sentence and "MTP block 0" in words.sentence
    assert "layer 52 is past" in result.findings[0].explanation.lower()


def test_a_module_path_on_a_later_pp_stage_says_the_groups_are_global(tmp_path):
    layer_map = _qwen3_next(tmp_path)
    log = ("vllm serve Qwen/Qwen3-Next-80B-A3B-Instruct --pipeline-parallel-size 2\n"
           "KeyError: 'language_model.model.layers.30.linear_attn'\n")
    result = diagnose(log, layer_map)
    assert result.reading.classes[0].name == "layer_lookup"
    (words,) = result.reading.layers
    assert words.layer == 30 and words.mixer == "gated_delta_net" and words.pp_stage == 1
    assert "on PP stage 1 of 2" in words.sentence and "global" in words.sentence
    finding = result.findings[0]
    assert finding.layers == (30,) and finding.code == "FAILURE_LAYER_LOOKUP"


def test_a_module_the_layer_does_not_have_is_pointed_out(tmp_path):
    layer_map = _qwen3_next(tmp_path)
    full = layer_map.full_attention_layers[0]
    result = diagnose(f"KeyError: 'model.layers.{full}.linear_attn'", layer_map)
    assert "which a attention layer does not have" in result.reading.layers[0].sentence


def test_a_five_thousand_digit_layer_id_is_reported_not_a_traceback(tmp_path):
    layer_map = _qwen3_next(tmp_path)
    digits = "9" * 5000
    log = (f"ValueError: layer_id={digits} not in full attention layers: dict_keys([3, 7])\n"
           f"KeyError: 'model.layers.{digits}.linear_attn'\n")
    result = diagnose(log, layer_map)
    codes = [f.code for f in result.findings]
    assert "ABSURD_LAYER_ID" in codes and not result.ok
    assert all(len(str(n)) < 10 for f in result.findings for n in f.layers)


VLLM_OOM = """\
(APIServer pid=4380) INFO 09-10 18:21:30 [api_server.py:1896] vLLM API server version 0.33.0
(EngineCore_DP0 pid=4410) INFO 09-10 18:21:58 [gpu_model_runner.py:5089] Model loading took 58.79 GiB memory and 41.2 seconds
(EngineCore_DP0 pid=4410) ERROR 09-10 18:22:20 [core.py:708] Traceback (most recent call last):
(EngineCore_DP0 pid=4410) ERROR 09-10 18:22:20 [core.py:708]   File "/x/vllm/v1/worker/gpu_worker.py", line 300, in determine_available_memory
(EngineCore_DP0 pid=4410) ERROR 09-10 18:22:20 [core.py:708] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 23.99 GiB of which 512.00 MiB is free.
"""


def test_a_vllm_out_of_memory_log_gets_vllm_flags_and_the_log_figures_checked():
    result = diagnose(VLLM_OOM)
    oom = next(f for f in result.findings if f.severity == "error")
    assert "--mem-fraction-static" not in oom.fix and "--tensor-parallel-size 3" in oom.fix
    assert "--gpu-memory-utilization" in oom.fix
    assert "58.79 GiB of the device's 23.99 GiB (245%)" in oom.explanation
    assert result.reading.stage == "kv_cache" and result.reading.engine == "vllm"
