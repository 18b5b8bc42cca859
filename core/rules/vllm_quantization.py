"""What vLLM does with a quantized checkpoint on each platform, read from vllm 0.33.0's wheel.

`ModelConfig._verify_quantization` (vllm/config/model.py:1383-1470) names the method from the
checkpoint (the overrides, in order: modelopt FP8 -> `modelopt`, NVFP4 -> `modelopt_fp4`, MXFP8 ->
`modelopt_mxfp8`, MIXED_PRECISION -> `modelopt_mixed`; gpt-oss mxfp4 -> `gpt_oss_mxfp4`; gptq ->
`auto_gptq`; awq -> `auto_awq` except on CPU) and calls the platform's `verify_quantization`
(platforms/interface.py:1156-1161): a platform with a `supported_quantization` list refuses any other
method with `M quantization is currently not supported in P.`; ROCm (rocm.py:668-692) and XPU
(xpu.py:113-131) have lists, CUDA and CPU have none. At load, `_get_quantization_config`
(config/vllm.py:916-944) compares the compute capability where the platform reports one (CUDA, ROCm;
XPU returns None, xpu.py:319-325) and refuses a model dtype outside the method's activation dtypes.
GGUF: vLLM 0.33 has no gguf method or load format at all. NVFP4 linears (modelopt_fp4 and
compressed-tensors' nvfp4) pick a kernel from `_POSSIBLE_NVFP4_KERNELS`, which lists CUDA's and, for
ROCm, only the emulation kernel: none for CPU or XPU.
"""

from __future__ import annotations

from bringup.core.rules.check import Check

_Q = "vllm/model_executor/layers/quantization/"
ROCM_SUPPORTED = frozenset({
    "awq", "auto_awq", "awq_marlin", "gptq", "auto_gptq", "fp8", "deepseek_v4_fp8", "compressed-tensors", "fbgemm_fp8",
    "inc", "quark", "mxfp4", "mxfp8", "torchao", "modelopt", "modelopt_fp4", "modelopt_mxfp8", "modelopt_mixed",
    "fp8_per_tensor", "fp8_per_block", "fp8_per_channel", "online", "gpt_oss_mxfp4"})
XPU_SUPPORTED = frozenset({
    "awq", "gptq", "moe_wna16", "auto_awq", "auto_gptq", "inc", "fp8", "deepseek_v4_fp8", "mxfp4", "mxfp8",
    "fp8_per_tensor", "fp8_per_block", "fp8_per_channel", "online", "gpt_oss_mxfp4", "modelopt", "compressed-tensors"})
PLATFORM_LISTS = {"rocm": (ROCM_SUPPORTED, "vllm/platforms/rocm.py:668-692"),
                  "xpu": (XPU_SUPPORTED, "vllm/platforms/xpu.py:113-131")}
VERIFY_SOURCE = "vllm/config/model.py:1470; vllm/platforms/interface.py:1158-1161"
LOAD_SOURCE = "vllm/config/vllm.py:928-943"
# method -> (min capability, activation dtypes, where both are returned)
METHODS = {
    "fp8": (75, ("bfloat16", "float16"), "fp8.py:143, :147"),
    "compressed-tensors": (70, ("float32", "float16", "bfloat16"), "compressed_tensors/compressed_tensors.py:120, :124"),
    "modelopt": (80, ("bfloat16", "float16"), "modelopt.py:446, :450"),
    "modelopt_fp4": (75, ("bfloat16", "float16"), "modelopt.py:769, :773"),
    "modelopt_mxfp8": (80, ("bfloat16",), "modelopt.py:1228, :1233"),
    "modelopt_mixed": (75, ("bfloat16", "float16"), "modelopt.py:1644, :1655"),
    "mxfp4": (80, ("bfloat16",), "mxfp4.py:72, :80"),
    "gpt_oss_mxfp4": (80, ("bfloat16",), "mxfp4.py:72, :80 (GptOssMxfp4Config inherits Mxfp4Config's)"),
    "auto_gptq": (60, ("float16", "bfloat16"), "auto_gptq.py:179, :183"),
    "auto_awq": (75, ("float16", "bfloat16"), "auto_awq.py:230, :234"),
}


# vllm/model_executor/kernels/linear/__init__.py: the NVFP4 linear kernels per platform, and the raise
# when a platform has none (init_nvfp4_linear_kernel, reached from modelopt.py:2435 and
# compressed_tensors/schemes/compressed_tensors_w4a4_nvfp4.py:31).
NVFP4_KERNELS_SOURCE = "vllm/model_executor/kernels/linear/__init__.py:592-613, :1263-1309"
NVFP4_NO_KERNEL = "ValueError: Failed to find a kernel that can implement the NVFP4 linear layer. Reasons: "


# Block-scaled fp8 linears on CPU: _POSSIBLE_FP8_BLOCK_KERNELS lists only the two AMX kernels
# (kernels/linear/__init__.py:511-514), each needing AMX tiles and a bf16/fp32 output
# (scaled_mm/cpu.py:246, :268 for the W8A16 one; :519, :544 for W8A8, which also needs AMX-FP8).
FP8_BLOCK_CPU_SOURCE = ("vllm/model_executor/kernels/linear/__init__.py:511-514, :740-743; "
                        "vllm/model_executor/kernels/linear/scaled_mm/cpu.py:246, :268, :519, :544")
SCALED_MM_NO_KERNEL = "ValueError: Failed to find a kernel that can implement the ScaledMM linear layer. Reasons: "


def vllm_method(m, device: str) -> str | None:
    """vLLM's method name for the checkpoint (None: not quantized, or a dialect not read here)."""
    q, algo = m.quant_method, m.quant_algo
    if q in ("fp8", "compressed-tensors"):
        return q
    if q == "modelopt":  # modelopt.py:453-459, :776-782, :1236-1242, :1658-1664
        if algo == "MIXED_PRECISION":
            return "modelopt_mixed"
        if "FP4" in algo:
            return "modelopt_fp4"
        return "modelopt_mxfp8" if "MXFP8" in algo else "modelopt"
    if q == "mxfp4":  # mxfp4.py:129-146: only a gpt_oss model_type takes the gpt-oss method
        return "gpt_oss_mxfp4" if m.model_type == "gpt_oss" else "mxfp4"
    if q == "gptq":
        return "auto_gptq"  # auto_gptq.py:214-231
    if q == "awq":
        return "awq" if device == "cpu" else "auto_awq"  # auto_awq.py:263-283
    return q or None


def check_quantization(c: Check) -> None:
    m, s = c.m, c.s
    if not m.weight_schemes:
        return
    if m.quant_method == "gguf":
        c.add("VLLM_QUANT_GGUF", "error",
              "vLLM 0.33 cannot load GGUF: it has neither a gguf quantization method nor a gguf load format.",
              fix="serve the GGUF with SGLang, or the safetensors checkpoint with vLLM",
              source=f"{_Q}__init__.py:15-49 (QuantizationMethods); vllm/config/load.py", stage="model load")
        return
    method = vllm_method(m, s.device)
    listed = PLATFORM_LISTS.get(s.device)
    if listed is not None and method not in listed[0]:
        c.add("VLLM_QUANT_PLATFORM", "error",
              f"vLLM's {s.device} platform does not list {method} among its quantization methods, so it refuses the "
              "checkpoint when it reads the model config.",
              fix="an fp8 or compressed-tensors checkpoint, the bf16 model, or a CUDA GPU",
              engine_message=f"ValueError: {method} quantization is currently not supported in {s.device}.",
              source=f"{listed[1]}; {VERIFY_SOURCE}", stage="model config")
        return
    nvfp4 = "nvfp4" in {k for k, _ in m.weight_schemes}
    if nvfp4 and s.device in ("cpu", "xpu"):
        _nvfp4_kernels(c, method)
        return
    facts = METHODS.get(method)
    if facts is None:
        return
    need, dtypes, where = facts
    dtype = c.m.config_dtype if s.dtype == "auto" else s.dtype
    if dtype in ("float16", "bfloat16", "float32") and dtype not in dtypes:
        c.add("VLLM_QUANT_DTYPE", "error", f"vLLM's {method} runs only with {' or '.join(dtypes)} activations; the "
              f"model dtype here is {dtype}.", fix=f"--dtype {dtypes[0]}",
              engine_message=f"ValueError: torch.{dtype} is not supported for quantization method {method}. Supported "
                             f"dtypes: [{', '.join('torch.' + d for d in dtypes)}]",
              source=f"{_Q}{where}; {LOAD_SOURCE}", stage="model load")
        return
    where_checked = {"cuda": f"on CUDA GPUs of compute capability {need // 10}.{need % 10} or newer",
                     "rocm": "on ROCm (its list includes it; MI200/MI300 report capability 9.0/9.4)",
                     "xpu": "on XPU (its list includes it; XPU reports no capability, so none is checked)",
                     "cpu": "on CPU (the CPU platform has no list and no capability check)"}.get(s.device)
    if where_checked is None:
        return
    c.add("VLLM_QUANT_ACCEPTED", "info", f"vLLM names this checkpoint's method {method} and accepts it {where_checked}; "
          "its kernels there are not predicted here.",
          engine_message=(f"ValueError: The quantization method {method} is not supported for the current GPU. Minimum "
                          f"capability: {need}. Current capability: <your GPU's>." if s.device == "cuda" else ""),
          source=f"{_Q}{where}; {LOAD_SOURCE}" + (f"; {listed[1]}" if listed else ""), stage="model load")
    # The kernels are picked as the model is built, after the checks above.
    if nvfp4:
        _nvfp4_kernels(c, method)
    # Fp8LinearMethod picks its kernel at fp8.py:347.
    if s.device == "cpu" and method == "fp8" and "fp8_block" in {k for k, _ in m.weight_schemes}:
        _fp8_block_on_cpu(c, dtype)


def _fp8_block_on_cpu(c: Check, dtype: str | None) -> None:
    if dtype == "float16":
        c.add("VLLM_QUANT_FP8_CPU", "error", "vLLM's CPU kernels for block-scaled fp8 write bfloat16 or float32 only; "
              "with float16 no kernel takes the layer.", fix="--dtype bfloat16",
              engine_message=SCALED_MM_NO_KERNEL + "... Only bfloat16/float32 output dtype supported.",
              source=FP8_BLOCK_CPU_SOURCE, stage="model load")
        return
    c.add("VLLM_QUANT_FP8_CPU", "warning",
          "vLLM runs block-scaled fp8 linears on CPU only with AMX (Sapphire Rapids or newer): W8A8 where the CPU has "
          "AMX-FP8, else W8A16; a CPU without AMX has no kernel for them.",
          fix="a CPU with AMX, or the bf16 model", source=FP8_BLOCK_CPU_SOURCE, stage="model load",
          engine_message=SCALED_MM_NO_KERNEL + "... requires AMX tile support (Sapphire Rapids or newer).")


def _nvfp4_kernels(c: Check, method: str) -> None:
    """NVFP4 linears off CUDA: none on CPU/XPU, emulation on ROCm."""
    device = c.s.device
    if device in ("cpu", "xpu"):
        # modelopt's NVFP4 is W4A4 (the auto path raises with no reasons); a weight-only table takes another path.
        c.add("VLLM_QUANT_NVFP4_KERNEL", "error",
              f"vLLM has no NVFP4 linear kernel for {device}, so the first NVFP4 layer of this {method} checkpoint "
              "fails to build.", fix="a CUDA GPU (or ROCm, emulated), or the bf16 model",
              engine_message=NVFP4_NO_KERNEL if method == "modelopt_fp4" else "",
              source=NVFP4_KERNELS_SOURCE, stage="model load")
    elif device == "rocm":
        c.add("VLLM_QUANT_NVFP4_KERNEL", "warning",
              "vLLM's only NVFP4 linear kernel on ROCm is EmulationNvFp4LinearKernel, what vLLM itself calls "
              "'the slow and unoptimized emulation backend' (kernels/linear/__init__.py:1294-1296).",
              fix="a Blackwell GPU for native NVFP4, or the bf16 model",
              source=NVFP4_KERNELS_SOURCE, stage="model load")
