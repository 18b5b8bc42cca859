"""What SGLang does with a quantized checkpoint at load on a CUDA GPU: the compute capability each
quantization method needs, read from each release's wheel.

`model_loader/loader.py` (`_get_quantization_config`) compares the GPU's capability (major * 10 +
minor) with the method's `get_min_capability()` and raises `ValueError: The quantization method M
is not supported for the current GPU. Minimum capability: N. Current capability: C.` below it (NPUs
skip the check). Read in sglang 0.5.17 to 0.5.23 (`pip download --no-deps sglang==X`, every release
read, lines below): `fp8` (Fp8Config, layers/quantization/fp8.py) 80 (100 for its mxfp8 form),
`modelopt_fp8` 89, `modelopt_fp4` 80, `modelopt_mixed` ModelOptFp4Config's (80), `mxfp4` 80, `gguf` 60, `compressed-tensors` 70.
Other devices: sglang_quant_devices.py.
"""

from __future__ import annotations

from bringup.core.rules.check import Check
from bringup.core.rules.model_facts import ModelFacts
from bringup.core.rules.sglang_quant_devices import device_verdict, mlx_verdict

# release -> (loader.py line of the message, {method: (min capability, file:line of its get_min_capability's return)})
_Q = "python/sglang/srt/layers/quantization/"
MIN_CAPABILITY = {
    (0, 5, 17): (291, {"fp8": (80, "fp8.py:298"), "modelopt_fp8": (89, "modelopt_quant.py:421"),
                       "modelopt_fp4": (80, "modelopt_quant.py:1253"), "modelopt_mixed": (80, "modelopt_quant.py:666"),
                       "mxfp4": (80, "mxfp4.py:278"),
                       "gguf": (60, "gguf.py:97"), "compressed-tensors": (70, "compressed_tensors/compressed_tensors.py:141")}),
    (0, 5, 18): (299, {"fp8": (80, "fp8.py:299"), "modelopt_fp8": (89, "modelopt_quant.py:418"),
                       "modelopt_fp4": (80, "modelopt_quant.py:1413"), "modelopt_mixed": (80, "modelopt_quant.py:770"),
                       "mxfp4": (80, "mxfp4.py:279"),
                       "gguf": (60, "gguf.py:97"), "compressed-tensors": (70, "compressed_tensors/compressed_tensors.py:141")}),
    (0, 5, 19): (251, {"fp8": (80, "fp8.py:308"), "modelopt_fp8": (89, "modelopt_quant.py:434"),
                       "modelopt_fp4": (80, "modelopt_quant.py:1469"), "modelopt_mixed": (80, "modelopt_quant.py:825"),
                       "mxfp4": (80, "mxfp4.py:335"),
                       "gguf": (60, "gguf.py:108"), "compressed-tensors": (70, "compressed_tensors/compressed_tensors.py:156")}),
    (0, 5, 20): (254, {"fp8": (80, "fp8.py:322"), "modelopt_fp8": (89, "modelopt_quant.py:454"),
                       "modelopt_fp4": (80, "modelopt_quant.py:1498"), "modelopt_mixed": (80, "modelopt_quant.py:834"),
                       "mxfp4": (80, "mxfp4.py:321"),
                       "gguf": (60, "gguf.py:108"), "compressed-tensors": (70, "compressed_tensors/compressed_tensors.py:156")}),
    (0, 5, 21): (257, {"fp8": (80, "fp8.py:328"), "modelopt_fp8": (89, "modelopt_quant.py:454"),
                       "modelopt_fp4": (80, "modelopt_quant.py:1525"), "modelopt_mixed": (80, "modelopt_quant.py:838"),
                       "mxfp4": (80, "mxfp4.py:325"),
                       "gguf": (60, "gguf.py:108"), "compressed-tensors": (70, "compressed_tensors/compressed_tensors.py:158")}),
    (0, 5, 22): (258, {"fp8": (80, "fp8.py:333"), "modelopt_fp8": (89, "modelopt_quant.py:462"),
                       "modelopt_fp4": (80, "modelopt_quant.py:1529"), "modelopt_mixed": (80, "modelopt_quant.py:846"),
                       "mxfp4": (80, "mxfp4.py:339"),
                       "gguf": (60, "gguf.py:108"), "compressed-tensors": (70, "compressed_tensors/compressed_tensors.py:160")}),
    (0, 5, 23): (262, {"fp8": (80, "fp8.py:339"), "modelopt_fp8": (89, "modelopt_quant.py:463"),
                       "modelopt_fp4": (80, "modelopt_quant.py:1550"), "modelopt_mixed": (80, "modelopt_quant.py:847"),
                       "mxfp4": (80, "mxfp4.py:339"),
                       "gguf": (60, "gguf.py:115"), "compressed-tensors": (70, "compressed_tensors/compressed_tensors.py:161")}),
}


def sglang_method(m: ModelFacts) -> str | None:
    """SGLang's quantization method name for the checkpoint's dialect and schemes (None: not read here)."""
    keys = {k for k, _ in m.weight_schemes}
    if m.quant_method in ("fp8", "mxfp4", "gguf", "compressed-tensors"):
        return m.quant_method
    if m.quant_method == "mlx" and len(keys) == 1 and keys <= {"mlx_int4", "mlx_int8"}:
        return "mlx_q4" if "mlx_int4" in keys else "mlx_q8"  # MlxQuantizationConfig's override (mlx.py:115-118)
    if m.quant_method == "awq":
        # Off CUDA awq stays awq (is_awq_marlin_compatible: `if not _is_cuda: return False`, awq/awq.py:380 in
        # 0.5.17-0.5.18, :409 in 0.5.19-0.5.23); on CUDA it may become awq_marlin, whose capability is not read.
        return "awq"
    if m.quant_method == "modelopt":
        # _parse_modelopt_quant_config (configs/model_config.py:1864-1869 in 0.5.23, :1270-1275 in 0.5.17):
        # MIXED_PRECISION is modelopt_mixed with an NVFP4 layer in its table, else w4afp8.
        if m.quant_algo == "MIXED_PRECISION" or (not m.quant_algo and len(keys) > 1):
            return "modelopt_mixed" if "nvfp4" in keys else "w4afp8"
        return "modelopt_fp4" if "nvfp4" in keys else "modelopt_fp8"
    return None


def check_quantization(c: Check) -> None:
    m, s, profile = c.m, c.s, c.profile
    method = sglang_method(m) if m.weight_schemes else None
    if method is None:
        return
    if method.startswith("mlx_"):
        _add_verdict(c, mlx_verdict(method, s.device, profile.version))
    elif s.device == "cuda":
        _check_capability(c, method)
        _nvfp4_gemm(c, method)
    else:
        _check_device(c, method)


def _check_device(c: Check, method: str) -> None:
    """ROCm, XPU, CPU, NPU: the method registry and lists of each release (sglang_quant_devices.py)."""
    _add_verdict(c, device_verdict(method, c.s.device, c.profile.version))


def _add_verdict(c: Check, verdict) -> None:
    if verdict is None:
        return
    severity = {True: "info", False: "error", None: "warning"}[verdict.accepted]
    c.add("SGLANG_QUANT_DEVICE", severity, f"SGLang {c.profile.label} on {c.s.device}: {verdict.message}",
          fix=verdict.fix, engine_message=verdict.engine_message, source=verdict.source, stage=verdict.stage)


def _check_capability(c: Check, method: str) -> None:
    profile = c.profile
    facts = MIN_CAPABILITY.get(tuple(profile.version))
    if facts is None or method not in facts[1]:
        return
    line, table = facts
    need, where = table[method]
    c.add("SGLANG_QUANT_CAPABILITY", "info",
          f"SGLang {profile.label} loads this {method} checkpoint on CUDA GPUs of compute capability {need // 10}.{need % 10} "
          f"or newer (H100/H200: 9.0; A100: 8.0; L40S: 8.9); on an older GPU it refuses it at load.",
          fix="a GPU of that capability, or a checkpoint in another format",
          engine_message=(f"ValueError: The quantization method {method} is not supported for the current GPU. "
                          f"Minimum capability: {need}. Current capability: <your GPU's>."),
          source=f"{_Q}{where}; python/sglang/srt/model_loader/loader.py:{line}", stage="model load")


# fp4_utils.py initialize_fp4_gemm_config: the line of `if backend == "auto":` (every release: SM100 ->
# flashinfer_cutedsl, CUDA 8.0 <= capability < 10.0 -> marlin, else flashinfer_cutlass).
FP4_AUTO_LINE = {(0, 5, 17): 150, (0, 5, 18): 150, (0, 5, 19): 150, (0, 5, 20): 150, (0, 5, 21): 150,
                 (0, 5, 22): 154, (0, 5, 23): 154}


def _nvfp4_gemm(c: Check, method: str) -> None:
    """NVFP4 linears on Hopper run weight-only through Marlin; FP4 matrix units are Blackwell's."""
    line = FP4_AUTO_LINE.get(tuple(c.profile.version))
    fp4 = method == "modelopt_fp4" or (method == "modelopt_mixed" and "nvfp4" in {k for k, _ in c.m.weight_schemes})
    if line is None or not fp4 or c.s.gpu not in ("hopper", "blackwell"):
        return
    how = ("FlashInfer's CuTe DSL FP4 GEMM (fp4 weights and activations)" if c.s.gpu == "blackwell" else
           "Marlin, weight-only (W4A16: the fp4 weights are widened in the kernel and activations stay in the model "
           "dtype), since Hopper has no FP4 matrix units")
    c.add("SGLANG_NVFP4_GEMM", "info",
          f"SGLang {c.profile.label}'s default --fp4-gemm-backend auto runs this checkpoint's NVFP4 linears on "
          f"{c.s.gpu.title()} with {how}.",
          source=f"{_Q}fp4_utils.py:{line}", stage="model load")
