"""What SGLang does with each quantization method off CUDA: on ROCm, XPU, CPU and NPU, read from each
release's wheel (`pip download --no-deps sglang==X`, 0.5.17 to 0.5.23, every release read).

Three places decide it, in this order:
1. `ModelConfig._verify_quantization` (configs/model_config.py) raises `Unknown quantization method:
   M` for a method the registry lacks on this device, then on ROCm `M quantization is currently not
   supported in ROCm.` for one outside its `rocm_supported_quantization` list (modelopt_fp8,
   modelopt_fp4, modelopt_mixed and gguf are never in it; gptq left both the list and, on ROCm and CUDA,
   the registry in 0.5.20);
2. the registry (layers/quantization/__init__.py) registers `mxfp4` (the gpt-oss MoE Mxfp4Config) only
   on CPU, CUDA, gfx95x ROCm (MI350/MI355) and, from 0.5.20, XPU; on NPU `mxfp4` is the dense W4A4
   Mxfp4W4A4Config instead; `get_quantization_config` on a CPU with AMX (`SGLANG_USE_CPU_ENGINE=1`)
   takes only its CPU_QUANTIZATION_METHODS and raises `Invalid quantization method on CPU: M` for the rest;
3. the loader (model_loader/loader.py) checks the compute capability only where torch reports one:
   CUDA and ROCm (MI300 reports 9.4, above every method's minimum); XPU and CPU report none and NPUs
   skip the check (`if not _is_npu:`), so nothing there refuses a method by device.
Fp8Config's linear and MoE methods then assert AMX on CPU (layers/quantization/fp8.py).
"""

from __future__ import annotations

from dataclasses import dataclass

_MC = "python/sglang/srt/configs/model_config.py"
_INIT = "python/sglang/srt/layers/quantization/__init__.py"
_FP8 = "python/sglang/srt/layers/quantization/fp8.py"
_LOADER = "python/sglang/srt/model_loader/loader.py"

_ROCM_OLD = frozenset({"awq", "gptq", "fp8", "compressed_tensors", "compressed-tensors", "w8a8_fp8", "petit_nvfp4",
                       "quark", "mxfp4", "mxfp8", "auto-round", "auto-round-int8", "quark_int4fp8_moe", "quark_mxfp4"})
_ROCM_NEW = _ROCM_OLD - {"gptq"}  # 0.5.20 dropped gptq from the ROCm list
_CPU_OLD = frozenset({"fp8", "w8a8_int8", "compressed-tensors", "awq", "gptq", "mxfp4"})
_CPU_NEW = _CPU_OLD | {"auto-round"}  # 0.5.18 added auto-round


@dataclass(frozen=True)
class DeviceFacts:
    """One release's device rules for quantization methods, each with the line it was read at."""

    unknown_line: int  # model_config.py: "Unknown quantization method"
    rocm_list_line: int  # model_config.py: rocm_supported_quantization = [
    rocm_message_line: int  # model_config.py: "... quantization is currently not supported in ROCm."
    rocm_supported: frozenset
    mxfp4_line: int  # __init__.py: the `if` that registers Mxfp4Config
    mxfp4_on_xpu: bool
    npu_mxfp4_line: int  # __init__.py: "mxfp4": Mxfp4W4A4Config under is_npu()
    cpu_list_line: int  # __init__.py: CPU_QUANTIZATION_METHODS = {
    cpu_message_line: int  # __init__.py: "Invalid quantization method on CPU"
    cpu_supported: frozenset
    npu_skip_line: int  # loader.py: `if not _is_npu:` before the capability check
    fp8_amx_linear_line: int  # fp8.py: "Fp8LinearMethod on CPU requires that CPU has AMX support"
    fp8_amx_moe_line: int  # fp8.py: "Fp8MoEMethod on CPU requires that CPU has AMX support"
    base_line: int  # __init__.py: BASE_QUANTIZATION_METHODS (every device's methods)
    xpu_capability_line: int  # utils/common.py: "Currently XPU version does not contain capability information."


DEVICE_FACTS = {
    (0, 5, 17): DeviceFacts(1518, 1382, 1523, _ROCM_OLD, 105, False, 120, 134, 157, _CPU_OLD, 282, 686, 1601, 73, 964),
    (0, 5, 18): DeviceFacts(1585, 1442, 1590, _ROCM_OLD, 104, False, 119, 133, 157, _CPU_NEW, 290, 693, 1631, 72, 977),
    (0, 5, 19): DeviceFacts(1649, 1506, 1654, _ROCM_OLD, 111, False, 126, 149, 173, _CPU_NEW, 242, 702, 1671, 79, 975),
    (0, 5, 20): DeviceFacts(1866, 1718, 1871, _ROCM_NEW, 97, True, 112, 147, 171, _CPU_NEW, 245, 751, 1759, 62, 996),
    (0, 5, 21): DeviceFacts(1962, 1814, 1967, _ROCM_NEW, 97, True, 112, 147, 171, _CPU_NEW, 248, 797, 1996, 62, 1075),
    (0, 5, 22): DeviceFacts(2041, 1893, 2046, _ROCM_NEW, 97, True, 112, 147, 171, _CPU_NEW, 249, 809, 2072, 62, 1135),
    (0, 5, 23): DeviceFacts(2153, 2002, 2158, _ROCM_NEW, 99, True, 114, 149, 173, _CPU_NEW, 253, 828, 2186, 63, 1179),
}


@dataclass(frozen=True)
class Verdict:
    """What one release does with one method on one device."""

    accepted: bool | None  # None: it depends on a fact of the machine the settings do not hold
    message: str
    engine_message: str = ""
    source: str = ""
    stage: str = "model load"
    fix: str = ""


def device_verdict(method: str, device: str, release: tuple[int, int, int]) -> Verdict | None:
    """SGLang `release`'s answer for `method` on `device` (rocm, xpu, cpu, npu); None where not read."""
    f = DEVICE_FACTS.get(tuple(release))
    if f is None or device not in ("rocm", "xpu", "cpu", "npu"):
        return None
    return {"rocm": _rocm, "xpu": _xpu, "cpu": _cpu, "npu": _npu}[device](method, f)


def _unknown(method: str, f: DeviceFacts, where: str, fix: str) -> Verdict:
    return Verdict(False, f"SGLang does not register the {method} method {where}, so it refuses the checkpoint "
                          "when it reads the model config.",
                   f"ValueError: Unknown quantization method: {method}. Must be one of [...].",
                   f"{_INIT}:{f.mxfp4_line}; {_MC}:{f.unknown_line}", "model config", fix)


def _rocm(method: str, f: DeviceFacts) -> Verdict:
    if method == "gptq" and "gptq" not in f.rocm_supported:
        # 0.5.20 took GPTQConfig out of BASE_QUANTIZATION_METHODS (only CPU, XPU and NPU register a gptq), so
        # the registry check fails before the ROCm list is read.
        return Verdict(False, "SGLang registers no plain gptq method on ROCm from 0.5.20 on (only CPU, XPU and NPU "
                              "register one), so it refuses the checkpoint when it reads the model config.",
                       f"ValueError: Unknown quantization method: {method}. Must be one of [...].",
                       f"{_INIT}:{f.base_line}; {_MC}:{f.unknown_line}", "model config",
                       "sglang 0.5.19 or older, or an fp8 / compressed-tensors checkpoint")
    if method == "gptq":
        return Verdict(None, "SGLang's ROCm list takes gptq but not gptq_marlin, and a gptq table Marlin can take "
                             "(is_gptq_marlin_compatible; ROCm reports a capability of 8.0 or more) is renamed "
                             "gptq_marlin first, which the list refuses.",
                       "ValueError: gptq_marlin quantization is currently not supported in ROCm.",
                       f"{_MC}:{f.rocm_list_line}, :{f.rocm_message_line}; "
                       "python/sglang/srt/layers/quantization/marlin_utils.py", "model config",
                       "--quantization gptq keeps the plain method")
    if method == "mxfp4":
        return Verdict(None, "SGLang registers mxfp4 on ROCm only for gfx95x GPUs (MI350/MI355); on an MI300 "
                             "(gfx942) or older it refuses the checkpoint as an unknown method.",
                       f"ValueError: Unknown quantization method: {method}. Must be one of [...].",
                       f"{_INIT}:{f.mxfp4_line}; {_MC}:{f.unknown_line}", "model config",
                       "an MI350/MI355, or a bf16 checkpoint on MI300")
    if method not in f.rocm_supported:
        return Verdict(False, f"SGLang's ROCm list of quantization methods lacks {method}, so it refuses the "
                              "checkpoint when it reads the model config.",
                       f"ValueError: {method} quantization is currently not supported in ROCm.",
                       f"{_MC}:{f.rocm_list_line}, :{f.rocm_message_line}", "model config",
                       "a checkpoint in fp8 or compressed-tensors, or the bf16 model, on ROCm; or a CUDA GPU")
    return Verdict(True, f"SGLang's ROCm list includes {method}; the loader's capability check passes on MI200/MI300 "
                         "(torch reports 9.0/9.4).",
                   source=f"{_MC}:{f.rocm_list_line}; {_LOADER}:{f.npu_skip_line}")


def _xpu(method: str, f: DeviceFacts) -> Verdict:
    if method == "mxfp4" and not f.mxfp4_on_xpu:
        return _unknown(method, f, "on XPU in this release (XPU joined the registry in 0.5.20)",
                        "sglang 0.5.20 or newer, or the bf16 model")
    return Verdict(True, f"SGLang registers {method} on XPU and skips the capability check there (torch.xpu reports "
                         "no compute capability); its kernels on XPU are not predicted here.",
                   source=f"{_INIT}:{f.base_line}; python/sglang/srt/utils/common.py:{f.xpu_capability_line}")


def _cpu(method: str, f: DeviceFacts) -> Verdict:
    if method not in f.cpu_supported:
        return Verdict(False, f"SGLang's CPU engine (Intel AMX) takes only {', '.join(sorted(f.cpu_supported))}; "
                              f"it refuses {method} when the loader looks the method up.",
                       f"ValueError: Invalid quantization method on CPU: {method}. Available methods on CPU: [...]",
                       f"{_INIT}:{f.cpu_list_line}, :{f.cpu_message_line}", "model load",
                       "an fp8 or compressed-tensors checkpoint, or the bf16 model, on CPU")
    if method == "fp8":
        return Verdict(None, "SGLang loads fp8 on CPU only where the CPU has AMX (Sapphire Rapids or newer): its "
                             "linear and MoE fp8 methods assert it after loading the weights.",
                       "AssertionError: Fp8LinearMethod on CPU requires that CPU has AMX support",
                       f"{_INIT}:{f.cpu_list_line}; {_FP8}:{f.fp8_amx_linear_line}, :{f.fp8_amx_moe_line}",
                       "model load", "a CPU with AMX, or the bf16 model")
    return Verdict(True, f"SGLang's CPU methods include {method}.", source=f"{_INIT}:{f.cpu_list_line}")


def _npu(method: str, f: DeviceFacts) -> Verdict:
    if method == "mxfp4":
        return Verdict(None, "On NPU SGLang's mxfp4 is the dense W4A4 Mxfp4W4A4Config, not the gpt-oss MoE "
                             "Mxfp4Config the CUDA build uses: a gpt-oss mxfp4 checkpoint is read by a different "
                             "method there.", source=f"{_INIT}:{f.npu_mxfp4_line}", stage="model load",
                       fix="check the Ascend notes for this model")
    return Verdict(True, f"SGLang registers {method} on NPU and the loader skips the capability check there; its "
                         "NPU kernels are not predicted here.",
                   source=f"{_INIT}:{f.base_line}; {_LOADER}:{f.npu_skip_line}")


# MLX presets (layers/quantization/mlx.py, the same in every release read): MlxQuantizationConfig's
# override (mlx.py:80) names a bare {"group_size", "bits"} table mlx_q4 / mlx_q8, but the registry lists it
# only under `if is_mps():` (the line of "mlx_q4" below); its from_config raises _ERR (mlx.py:47, :77): the
# MLX backend (SGLANG_USE_MLX=1) quantizes on its own.
MLX_REGISTRY_LINE = {(0, 5, 17): 128, (0, 5, 18): 127, (0, 5, 19): 143, (0, 5, 20): 141, (0, 5, 21): 141,
                     (0, 5, 22): 141, (0, 5, 23): 143}
MLX_ERR = ("NotImplementedError: MLX on-the-fly quantization (--quantization mlx_q4 / mlx_q8) is handled by the MLX "
           "backend at model-load time via mlx_lm.utils.quantize_model, not by this QuantizationConfig class. If you "
           "reached this error, SGLANG_USE_MLX=1 is likely not set.")


def mlx_verdict(method: str, device: str, release: tuple[int, int, int]) -> Verdict | None:
    line, f = MLX_REGISTRY_LINE.get(tuple(release)), DEVICE_FACTS.get(tuple(release))
    if line is None or f is None:
        return None
    mlx = "python/sglang/srt/layers/quantization/mlx.py"
    if device == "mps":
        return Verdict(None, f"SGLang names this MLX table {method} (MlxQuantizationConfig's override) and serves it "
                             "only through its MLX backend, with SGLANG_USE_MLX=1; the PyTorch path refuses it.",
                       MLX_ERR, f"{mlx}:80, :47, :77; {_INIT}:{line}", "model load", "set SGLANG_USE_MLX=1")
    return Verdict(False, "SGLang registers its MLX presets only on Apple MPS, so off MPS nothing claims this table "
                          "(group_size and bits, no quant_method) and the method name it reads is empty.",
                   "ValueError: Unknown quantization method: . Must be one of [...].",
                   f"{_INIT}:{line}; {mlx}:80; {_MC}:{f.unknown_line}", "model config",
                   "the original bf16 checkpoint (or a GGUF / fp8 one) off Apple silicon")
