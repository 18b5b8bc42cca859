"""The line that names what a server runs names its weight scheme: fp8 as stored, GGUF blocks, or
the scheme an explicit dtype dequantised; plain weights stay as they were."""

from __future__ import annotations

from bringup.core.client.running_label import ServedModel, running_label

BASE = {"architecture": "NemotronHForCausalLM", "params": 31_580_000_000, "load_format": "dummy", "dtype": "bfloat16",
        "device": "cuda:0", "device_name": "NVIDIA H200"}


def info(weights: dict) -> dict:
    return {**BASE, "weights": weights}


def test_fp8_as_stored_is_named_beside_the_activations_dtype():
    label = running_label(info({"scheme": "fp8_e4m3, fp32 per 128x128 block (W8A16)", "method": "fp8",
                                "dequantised_from": ""}))
    assert "fp8_e4m3, fp32 per 128x128 block (W8A16) · bfloat16" in label
    assert ServedModel.from_info(info({"scheme": "GGUF Q4_1, Q8_0 blocks", "method": "gguf",
                                       "dequantised_from": ""})).facts()["quantization"] == "GGUF Q4_1, Q8_0 blocks"


def test_a_dequantised_checkpoint_says_from_what():
    served = ServedModel.from_info(info({"scheme": "bfloat16", "method": "modelopt",
                                         "dequantised_from": "fp4_e2m1, fp8_e4m3 per 16 + fp32 per tensor"}))
    assert served.quantization == "dequantised to bfloat16 from fp4_e2m1, fp8_e4m3 per 16 + fp32 per tensor"
    assert "dequantised to bfloat16 from fp4_e2m1" in served.label


def test_plain_weights_keep_their_line():
    assert running_label(info({"scheme": "bfloat16", "method": "", "dequantised_from": ""})) == running_label(BASE)


def test_kept_gguf_blocks_name_the_arithmetic_of_their_products():
    """The dtype beside them is the activations' (float32): the blocks' CPU products run bf16 inside."""
    weights = {"scheme": "GGUF Q4_1, Q8_0 blocks", "method": "gguf", "dequantised_from": "", "products_dtype": "bfloat16"}
    served = ServedModel.from_info({**BASE, "dtype": "float32", "device": "cpu", "weights": weights})
    assert served.quantization == "GGUF Q4_1, Q8_0 blocks, bfloat16 products"
    assert "GGUF Q4_1, Q8_0 blocks, bfloat16 products · float32 · cpu" in served.label
