"""Validate of a quantized checkpoint off CUDA: what each SGLang release's registry, ROCm list and CPU
list do with the checkpoint's method (core/rules/sglang_quant_devices.py), on Nano's config with the
quantization table a checkpoint would carry."""

from __future__ import annotations

import json

import pytest

from bringup.core.families import build_layer_map
from bringup.core.rules.settings import LaunchSettings
from bringup.core.validate.validate import validate

from repo_paths import NANO_CONFIG

FP8 = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
NVFP4 = {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16, "exclude_modules": ["lm_head"]}
MODELOPT_FP8 = {"quant_method": "modelopt", "quant_algo": "FP8"}
MXFP4 = {"quant_method": "mxfp4"}
CT_FP8 = {"quant_method": "compressed-tensors", "config_groups": {"group_0": {
    "targets": ["Linear"], "weights": {"num_bits": 8, "type": "float", "strategy": "channel"},
    "input_activations": {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True}}}}
RELEASES = ("0.5.17", "0.5.18", "0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23")


def device_finding(quant: dict, target: str, device: str):
    config = json.loads(NANO_CONFIG.read_text())
    config["quantization_config"] = quant
    result = validate(build_layer_map(config), target, LaunchSettings(device=device))
    found = [f for f in result.findings if f.code == "SGLANG_QUANT_DEVICE"]
    assert len(found) == 1, [f.code for f in result.findings]
    return found[0]


@pytest.mark.parametrize("release", RELEASES)
def test_rocm_refuses_modelopt_methods_in_every_release(release):
    for quant, method in ((NVFP4, "modelopt_fp4"), (MODELOPT_FP8, "modelopt_fp8")):
        f = device_finding(quant, f"sglang=={release}", "rocm")
        assert f.severity == "error" and f.stage == "model config"
        assert f.engine_message == f"ValueError: {method} quantization is currently not supported in ROCm."
        assert "configs/model_config.py:" in f.source


@pytest.mark.parametrize("quant", (FP8, CT_FP8))
def test_rocm_takes_fp8_and_compressed_tensors(quant):
    for release in ("0.5.17", "0.5.23"):
        f = device_finding(quant, f"sglang=={release}", "rocm")
        assert f.severity == "info" and not f.engine_message


def test_mxfp4_on_rocm_depends_on_the_gpu_generation():
    f = device_finding(MXFP4, "sglang==0.5.21", "rocm")
    assert f.severity == "warning" and "gfx95" in f.message
    assert f.engine_message.startswith("ValueError: Unknown quantization method: mxfp4.")


def test_mxfp4_joins_the_xpu_registry_in_0520():
    for release in ("0.5.17", "0.5.18", "0.5.19"):
        f = device_finding(MXFP4, f"sglang=={release}", "xpu")
        assert f.severity == "error" and "Unknown quantization method: mxfp4" in f.engine_message, release
    for release in ("0.5.20", "0.5.23"):
        assert device_finding(MXFP4, f"sglang=={release}", "xpu").severity == "info"


def test_cpu_takes_only_its_own_methods_and_fp8_needs_amx():
    refused = device_finding(NVFP4, "sglang==0.5.19", "cpu")
    assert refused.severity == "error"
    assert refused.engine_message.startswith("ValueError: Invalid quantization method on CPU: modelopt_fp4.")
    amx = device_finding(FP8, "sglang==0.5.23", "cpu")
    assert amx.severity == "warning" and "AMX" in amx.engine_message and "fp8.py:" in amx.source
    assert device_finding(CT_FP8, "sglang==0.5.17", "cpu").severity == "info"


def test_npu_reads_mxfp4_with_its_dense_w4a4_method():
    f = device_finding(MXFP4, "sglang==0.5.22", "npu")
    assert f.severity == "warning" and "Mxfp4W4A4Config" in f.message
    assert device_finding(NVFP4, "sglang==0.5.22", "npu").severity == "info"


def test_gguf_is_refused_on_rocm_and_on_the_cpu_engine():
    from bringup.core.rules.sglang_quant_devices import device_verdict

    for release in ((0, 5, 17), (0, 5, 23)):
        assert device_verdict("gguf", "rocm", release).accepted is False
        assert device_verdict("gguf", "cpu", release).accepted is False
        assert device_verdict("gguf", "xpu", release).accepted is True


def test_gptq_leaves_the_rocm_registry_in_0520():
    from bringup.core.rules.sglang_quant_devices import device_verdict

    assert device_verdict("gptq", "rocm", (0, 5, 19)).accepted is None  # gptq_marlin, if Marlin can take it
    refused = device_verdict("gptq", "rocm", (0, 5, 20))
    assert refused.accepted is False and refused.engine_message.startswith("ValueError: Unknown quantization method: gptq.")


def test_sglang_names_a_mixed_table_by_its_nvfp4_layers():
    layers = {"backbone.layers.0.mixer": {"quant_algo": "FP8"}}
    mixed = {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "quantized_layers": layers}
    f = device_finding(mixed, "sglang==0.5.20", "rocm")
    assert f.engine_message == "ValueError: w4afp8 quantization is currently not supported in ROCm."
    with_fp4 = {**mixed, "quantized_layers": {**layers, "backbone.layers.1.mixer.experts": {"quant_algo": "NVFP4"}}}
    f = device_finding(with_fp4, "sglang==0.5.20", "rocm")
    assert f.engine_message == "ValueError: modelopt_mixed quantization is currently not supported in ROCm."


def test_awq_is_taken_off_cuda():
    awq = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True}
    for release, device in (("0.5.17", "rocm"), ("0.5.23", "rocm"), ("0.5.23", "cpu"), ("0.5.19", "xpu")):
        assert device_finding(awq, f"sglang=={release}", device).severity == "info", (release, device)


@pytest.mark.parametrize("release", ("0.5.17", "0.5.23"))
def test_mlx_tables_are_served_only_by_the_mlx_backend_on_mps(release):
    mlx = {"group_size": 64, "bits": 4}
    mps = device_finding(mlx, f"sglang=={release}", "mps")
    assert mps.severity == "warning" and "mlx_q4" in mps.message and "SGLANG_USE_MLX=1" in mps.engine_message
    for device in ("cuda", "xpu"):
        off = device_finding(mlx, f"sglang=={release}", device)
        assert off.severity == "error" and off.engine_message.startswith("ValueError: Unknown quantization method: .")
