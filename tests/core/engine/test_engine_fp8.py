"""FP8 checkpoints run as FP8: the linears and the routed experts keep fp8 weights and their block
scales, and the model computes what its dequantised twin computes. Schemes the engine cannot run
are refused with the scheme's name and the way out; an explicit dtype dequantises at load."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from bringup.core.engine.loader import load_model
from bringup.core.engine.model_source import load_model as load_any
from bringup.core.engine.quantized import Fp8Linear, dequantize_nvfp4
from bringup.core.errors import UserError
from bringup.kernels.reference.fp8_linear import quantize_fp8_block

from engine_helpers import tiny_nemotron_h
from models_helpers import Req, make_pools, run_engine


def pools(model) -> dict:
    kv, state = make_pools(model, dtype=torch.bfloat16)
    return {"kv_pool": kv, "state_pool": state}

BLOCK = [16, 16]
FP8_CONFIG = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": BLOCK,
              "modules_to_not_convert": ["lm_head", "backbone.embeddings", "mixer.gate"]}


def _quantizable(name: str, t: torch.Tensor) -> bool:
    return (name.endswith("proj.weight") and t.dim() == 2) and "embeddings" not in name


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """(the tiny NemotronH checkpoint, the same with its linears and experts stored as block fp8)."""
    dense = tiny_nemotron_h(tmp_path_factory.mktemp("dense"))
    fp8 = tmp_path_factory.mktemp("fp8")
    for f in dense.iterdir():
        if f.suffix != ".safetensors":
            shutil.copy(f, fp8 / f.name)
    tensors = {}
    for name, t in load_file(str(dense / "model.safetensors")).items():
        if _quantizable(name, t):
            q, s = quantize_fp8_block(t, tuple(BLOCK))
            tensors[name], tensors[name + "_scale_inv"] = q, s
        else:
            tensors[name] = t
    save_file(tensors, str(fp8 / "model.safetensors"))
    config = json.loads((fp8 / "config.json").read_text())
    config["quantization_config"] = FP8_CONFIG
    (fp8 / "config.json").write_text(json.dumps(config))
    return dense, fp8


def test_fp8_checkpoint_keeps_fp8_weights(checkpoints):
    _, fp8 = checkpoints
    model = load_model(fp8, dtype="auto").model
    scheme = model.weight_scheme
    assert scheme.quantized_linears > 0 and scheme.quantized_experts == len(model.layer_map.moe_layers)
    assert "fp8_e4m3" in scheme.label and "16x16" in scheme.label
    fp8_linears = [m for m in model.modules() if isinstance(m, Fp8Linear)]
    assert fp8_linears and all(m.weight.dtype == torch.float8_e4m3fn for m in fp8_linears)
    experts = next(m for n, m in model.named_modules() if n.endswith("experts"))
    assert experts.up_proj.dtype == torch.float8_e4m3fn and experts.up_proj_scale_inv.dtype == torch.float32
    assert model.lm_head.weight.dtype != torch.float8_e4m3fn  # kept in the model dtype


def test_fp8_model_computes_what_its_dequantised_twin_computes(checkpoints):
    _, fp8 = checkpoints
    quantized = load_model(fp8, dtype="auto").model
    twin = load_model(fp8, dtype="float32").model  # an explicit dtype dequantises at load
    assert twin.weight_scheme.quantized_linears == 0 and "fp8_e4m3" in twin.weight_scheme.dequantised_from
    assert not any(isinstance(m, Fp8Linear) for m in twin.modules())
    prompt = list(range(3, 40))
    a = run_engine(quantized, [Req(prompt, [20, 17], steps=4)])[0]
    b = run_engine(twin, [Req(prompt, [20, 17], steps=4)])[0]
    assert a.tokens == b.tokens
    for x, y in zip(a.logits, b.logits):
        assert (x - y).abs().max() <= 1e-4 * y.abs().max()


def test_fp8_dummy_weights_take_the_checkpoint_scheme(checkpoints):
    _, fp8 = checkpoints
    loaded = load_any(str(fp8 / "config.json"), load_format="dummy", dtype="auto")
    model = loaded.model
    assert model.weight_scheme.quantized_linears > 0
    lin = next(m for m in model.modules() if isinstance(m, Fp8Linear))
    assert torch.isfinite(lin.weight.float()).all() and (lin.weight_scale_inv > 0).all()
    assert run_engine(model, [Req(list(range(3, 12)), [9], steps=2)])[0].tokens


def test_nvfp4_is_refused_with_its_name_and_the_way_out(checkpoints, tmp_path):
    _, fp8 = checkpoints
    config = json.loads((fp8 / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16,
                                     "exclude_modules": ["lm_head"]}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    with pytest.raises(UserError, match=r"fp4_e2m1.*nvfp4.*--dtype bfloat16"):
        load_any(str(path), load_format="dummy", dtype="auto")
    loaded = load_any(str(path), load_format="dummy", dtype="float32")  # dequantised: runs, and says so
    assert "fp4_e2m1" in loaded.model.weight_scheme.dequantised_from


def test_fp8_tensor_in_a_dense_module_is_refused(checkpoints, tmp_path):
    _, fp8 = checkpoints
    broken = tmp_path / "broken"
    shutil.copytree(fp8, broken)
    config = json.loads((broken / "config.json").read_text())
    config["quantization_config"]["modules_to_not_convert"].append("mixer.in_proj")  # but in_proj is fp8
    (broken / "config.json").write_text(json.dumps(config))
    with pytest.raises(UserError, match="float8_e4m3fn.*quantization_config"):
        load_model(broken, dtype="auto")


def test_nvfp4_dequantisation():
    # e2m1 codes 1 (0.5) and 7 (6.0) in one byte, low nibble first; a group scale of 2, a tensor scale of 0.5
    packed = torch.tensor([[0x71] * 8], dtype=torch.uint8)  # 16 values
    scale = torch.tensor([[2.0]], dtype=torch.float32).to(torch.float8_e4m3fn)
    out = dequantize_nvfp4(packed, scale, torch.tensor(0.5))
    assert out.shape == (1, 16)
    assert out[0, :2].tolist() == [0.5, 6.0]


@pytest.mark.gpu
def test_fp8_on_the_gpu_matches_its_dequantised_twin(checkpoints, tmp_path):
    """The Triton fp8 path (W8A16 with bf16 activations; W8A8 prefill where the device has FP8 matrix
    units) against the bf16 model on the dequantised weights."""
    from bringup.kernels.triton import availability
    from bringup.kernels.triton.registration import W8A8_NAME

    GPU = next(d for d in availability.GPU_DEVICE_TYPES if availability.triton_reason(d) is None)
    _, fp8 = checkpoints
    bf16 = tmp_path / "fp8_bf16"
    shutil.copytree(fp8, bf16)
    config = json.loads((bf16 / "config.json").read_text())
    # As FP8 checkpoints say: the activations' dtype. Both keys: transformers 5 writes `dtype`, which
    # wins over `torch_dtype` (the tiny checkpoint's float32 there made the model float32, its
    # activations fell to the float32 reference product and met the bf16 KV pool in attention).
    config["dtype"] = config["torch_dtype"] = "bfloat16"
    (bf16 / "config.json").write_text(json.dumps(config))
    quantized = load_model(bf16, device=GPU, dtype="auto").model
    assert quantized.dtype == torch.bfloat16
    # Triton for every fp8 layer: W8A16, or W8A8 prefill where the device has FP8 matrix units
    kernels = set(quantized.weight_scheme.kernels.values())
    assert kernels and kernels <= {"triton", W8A8_NAME}, kernels
    twin = load_model(bf16, device=GPU, dtype="bfloat16").model
    prompt = list(range(3, 40))
    for chunks in ([37], [30, 7]):  # a prefill, then a chunk small enough for the GEMV forms
        a = run_engine(quantized, [Req(prompt, chunks, steps=2)], **pools(quantized))[0]
        b = run_engine(twin, [Req(prompt, chunks, steps=2)], **pools(twin))[0]
        same_prefix = 1 + (a.tokens[0] == b.tokens[0])  # the first decode step reads the same token
        for x, y in list(zip(a.logits, b.logits))[:same_prefix]:
            assert (x.float() - y.float()).abs().max() <= 5e-2 * y.float().abs().max()
