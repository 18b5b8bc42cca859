"""Validate of a quantized checkpoint against vLLM 0.33: the method vLLM names it, the platform's
supported_quantization list (ROCm, XPU), the method's activation dtypes, and GGUF's absence
(core/rules/vllm_quantization.py)."""

from __future__ import annotations

import json

import pytest

from bringup.core.families import build_layer_map
from bringup.core.rules.settings import LaunchSettings
from bringup.core.validate.validate import validate

from repo_paths import NANO_CONFIG

FP8 = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
NVFP4 = {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16, "exclude_modules": ["lm_head"]}
MIXED = {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "quantized_layers": {
    "backbone.layers.1.mixer.experts": {"quant_algo": "NVFP4", "group_size": 16},
    "backbone.layers.0.mixer": {"quant_algo": "FP8"}}}
MXFP4 = {"quant_method": "mxfp4"}
CT_FP8 = {"quant_method": "compressed-tensors", "config_groups": {"group_0": {
    "targets": ["Linear"], "weights": {"num_bits": 8, "type": "float", "strategy": "channel"}}}}


def quant_findings(quant: dict | None, device: str, dtype: str = "auto", config: dict | None = None) -> dict:
    config = config or json.loads(NANO_CONFIG.read_text())
    if quant is not None:
        config["quantization_config"] = quant
    result = validate(build_layer_map(config), "vllm==0.33.0", LaunchSettings(device=device, dtype=dtype))
    return {f.code: f for f in result.findings if f.code.startswith("VLLM_QUANT")}


@pytest.mark.parametrize("quant, method", ((NVFP4, "modelopt_fp4"), (MIXED, "modelopt_mixed")))
def test_xpu_refuses_modelopt_fp4_and_mixed_with_the_platform_message(quant, method):
    f = quant_findings(quant, "xpu")["VLLM_QUANT_PLATFORM"]
    assert f.severity == "error" and f.stage == "model config"
    assert f.engine_message == f"ValueError: {method} quantization is currently not supported in xpu."
    assert "vllm/platforms/xpu.py:113-131" in f.source


@pytest.mark.parametrize("device", ("cuda", "rocm", "xpu", "cpu"))
def test_fp8_blocks_and_compressed_tensors_pass_every_platform(device):
    for quant, method in ((FP8, "fp8"), (CT_FP8, "compressed-tensors")):
        found = quant_findings(quant, device)
        assert list(found)[0] == "VLLM_QUANT_ACCEPTED" and not any(f.severity == "error" for f in found.values())
        assert f"method {method} " in found["VLLM_QUANT_ACCEPTED"].message


def test_rocm_lists_every_modelopt_method():
    for quant in (NVFP4, MIXED, {"quant_method": "modelopt", "quant_algo": "FP8"}):
        assert list(quant_findings(quant, "rocm"))[0] == "VLLM_QUANT_ACCEPTED"


def test_cuda_names_the_minimum_capability_of_each_method():
    assert "capability 7.5" in quant_findings(NVFP4, "cuda")["VLLM_QUANT_ACCEPTED"].message
    assert "capability 8.0" in quant_findings({"quant_method": "modelopt", "quant_algo": "FP8"},
                                              "cuda")["VLLM_QUANT_ACCEPTED"].message


def test_mxfp4_refuses_float16_activations():
    f = quant_findings(MXFP4, "cuda", dtype="float16")["VLLM_QUANT_DTYPE"]
    assert f.engine_message == ("ValueError: torch.float16 is not supported for quantization method mxfp4. "
                                "Supported dtypes: [torch.bfloat16]")
    assert "VLLM_QUANT_DTYPE" not in quant_findings(MXFP4, "cuda", dtype="bfloat16")


def test_a_dense_checkpoint_has_no_quantization_finding():
    assert quant_findings(None, "xpu") == {}


def test_gguf_is_refused():
    config = json.loads(NANO_CONFIG.read_text())
    config["gguf"] = {"tensor_types": {"backbone.layers.0.mixer.in_proj.weight": "Q4_K",
                                       "backbone.layers.1.mixer.experts.up_proj.weight": "Q4_K"}}
    found = quant_findings(None, "cuda", config=config)
    assert found and found["VLLM_QUANT_GGUF"].severity == "error"


def test_nvfp4_linears_have_no_kernel_on_cpu_and_are_emulated_on_rocm():
    cpu = quant_findings(NVFP4, "cpu")
    assert "VLLM_QUANT_ACCEPTED" not in cpu
    assert cpu["VLLM_QUANT_NVFP4_KERNEL"].engine_message.startswith("ValueError: Failed to find a kernel")
    rocm = quant_findings(NVFP4, "rocm")
    assert rocm["VLLM_QUANT_NVFP4_KERNEL"].severity == "warning" and "Emulation" in rocm["VLLM_QUANT_NVFP4_KERNEL"].message
    ct_nvfp4 = {"quant_method": "compressed-tensors", "config_groups": {"group_0": {
        "targets": ["Linear"], "weights": {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16}}}}
    assert quant_findings(ct_nvfp4, "xpu")["VLLM_QUANT_NVFP4_KERNEL"].severity == "error"
    assert "VLLM_QUANT_NVFP4_KERNEL" not in quant_findings(NVFP4, "cuda")


def test_fp8_blocks_on_cpu_need_amx_and_a_bf16_output():
    amx = quant_findings(FP8, "cpu")["VLLM_QUANT_FP8_CPU"]
    assert amx.severity == "warning" and "requires AMX tile support" in amx.engine_message
    fp16 = quant_findings(FP8, "cpu", dtype="float16")["VLLM_QUANT_FP8_CPU"]
    assert fp16.severity == "error" and "Only bfloat16/float32 output dtype" in fp16.engine_message
    assert "VLLM_QUANT_FP8_CPU" not in quant_findings(FP8, "xpu") and "VLLM_QUANT_FP8_CPU" not in quant_findings(CT_FP8, "cpu")
