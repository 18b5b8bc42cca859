"""Validate says what the embedded engine does with a quantized checkpoint's weights: runs them as
stored, dequantises them for an explicit dtype, or refuses the scheme with the engine's own words."""

from __future__ import annotations

import json

from bringup.core.families import build_layer_map
from bringup.core.rules.settings import LaunchSettings
from bringup.core.validate.validate import validate

from repo_paths import NANO_CONFIG

FP8 = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
NVFP4 = {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16, "exclude_modules": ["lm_head"]}


def codes(quant: dict, dtype: str = "auto") -> dict:
    config = json.loads(NANO_CONFIG.read_text())
    config["quantization_config"] = quant
    result = validate(build_layer_map(config), "embedded", LaunchSettings(device="cuda", dtype=dtype))
    return {f.code: f for f in result.findings}


def test_nvfp4_is_refused_with_the_engine_message_and_the_dequantising_fix():
    found = codes(NVFP4)
    refused = found["EMBEDDED_WEIGHT_SCHEME"]
    assert refused.severity == "error" and "fp4_e2m1" in refused.message
    assert "--dtype bfloat16" in refused.engine_message and "--dtype bfloat16" in refused.fix


def test_an_explicit_dtype_dequantises_and_says_so():
    found = codes(NVFP4, "bfloat16")
    assert "EMBEDDED_WEIGHT_SCHEME" not in found and "EMBEDDED_WEIGHTS_DEQUANTISED" in found


def test_fp8_blocks_run_as_stored():
    found = codes(FP8)
    assert "EMBEDDED_WEIGHTS_QUANTIZED" in found and "EMBEDDED_WEIGHT_SCHEME" not in found


def test_sglang_names_the_compute_capability_its_loader_asks_of_each_method():
    config = json.loads(NANO_CONFIG.read_text())
    for quant, method, need in ((NVFP4, "modelopt_fp4", "8.0"), (FP8, "fp8", "8.0"),
                                ({"quant_method": "modelopt", "quant_algo": "FP8"}, "modelopt_fp8", "8.9")):
        config["quantization_config"] = quant
        result = validate(build_layer_map(config), "sglang==0.5.23", LaunchSettings(device="cuda"))
        found = {f.code: f for f in result.findings}["SGLANG_QUANT_CAPABILITY"]
        assert f"{method} checkpoint" in found.message and f"capability {need}" in found.message
        assert "loader.py:262" in found.source and "Minimum capability" in found.engine_message


def test_sglang_runs_nvfp4_linears_weight_only_on_hopper_and_as_fp4_on_blackwell():
    config = json.loads(NANO_CONFIG.read_text())
    config["quantization_config"] = NVFP4
    for release, line in (("0.5.17", 150), ("0.5.23", 154)):
        for gpu, kernel in (("hopper", "Marlin, weight-only"), ("blackwell", "CuTe DSL")):
            result = validate(build_layer_map(config), f"sglang=={release}", LaunchSettings(device="cuda", gpu=gpu))
            found = {f.code: f for f in result.findings}["SGLANG_NVFP4_GEMM"]
            assert kernel in found.message and found.source.endswith(f"fp4_utils.py:{line}")
    config["quantization_config"] = FP8
    result = validate(build_layer_map(config), "sglang==0.5.23", LaunchSettings(device="cuda", gpu="hopper"))
    assert "SGLANG_NVFP4_GEMM" not in {f.code for f in result.findings}
