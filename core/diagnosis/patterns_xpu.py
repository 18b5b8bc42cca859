"""The XPU bring-up sequence after PR #32227: the failures a hybrid meets on Intel GPUs one after
another, in the wording of the code that raises them (sources beside each pattern).

The entries already in catalogue.py (NO_BUFFER_PAGE_SIZE, PAGE_SIZE_CHANGED, CAUSAL_CONV1D_MISSING,
RELU2_MOE_UNSUPPORTED, CONV1D_UPDATE_XPU_KWARG, DEVICE_OUT_OF_MEMORY) stay there; these are the
ones that came back as UNRECOGNIZED_ERROR.
"""

from __future__ import annotations

from .pattern import Pattern

# Frames that show the call came from a Mamba / flash-linear-attention op (SGLang's or vLLM's).
_STATE_OPS = r"mamba|/fla/|layernorm_gated|ssd_|causal_conv1d|gated_delta|linear_attn|chunk_\w+\.py"

XPU: tuple[Pattern, ...] = (
    Pattern(
        "CUDA_HELPER_ON_XPU", "sglang", "error",
        r"Torch not compiled with CUDA enabled",
        "A CUDA-only helper was reached on XPU inside a Mamba / linear-attention op",
        "The traceback runs through a Mamba or flash-linear-attention kernel wrapper that calls torch.cuda "
        "directly (torch.cuda.device(index) as the launch context, or torch.cuda.get_device_properties(...)"
        ".multi_processor_count for the SM count that sizes the grid). On an XPU build of torch, torch.cuda is "
        "not compiled in, so the first such call raises, although the Triton kernel itself would run on XPU.",
        "Upgrade sglang to a release with PR #20234 (torch.get_device_module().device() in layernorm_gated, "
        "mamba_ssm, ssd_*) and PR #21668 (XPU in the CUDA-only utilities); on an older tree replace "
        "torch.cuda.device(...) with torch.get_device_module().device(...) and read the core count from "
        "torch.xpu.get_device_properties(...).gpu_subslice_count.",
        source="sglang PR #20234 (device-agnostic Mamba ops), PR #21668 (Qwen3.5 on XPU); torch/cuda/__init__.py _lazy_init",
        near=_STATE_OPS,
        supersedes=("UNRECOGNIZED_ERROR", "TORCH_NOT_COMPILED_FOR_DEVICE"),
    ),
    Pattern(
        "SM_COUNT_ON_XPU", "sglang", "error",
        r"'_XpuDeviceProperties' object has no attribute '(?P<attr>multi_processor_count|major|minor|max_shared_memory_per_block_optin)'",
        "A CUDA device property ({attr}) was asked of an XPU",
        "A kernel wrapper sizes its launch from a CUDA-only device property; torch.xpu's device properties "
        "have no {attr} (the XPU equivalents are gpu_subslice_count / gpu_eu_count).",
        "Upgrade sglang/vLLM to a release whose op reads the core count through the device module (sglang PR "
        "#21668); as a local patch, branch on the device type before reading {attr}.",
        source="torch.xpu._XpuDeviceProperties; sglang PR #21668; pytorch/helion PR #798",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "XPU_KERNEL_KWARG", "sglang", "error",
        r"(?P<fn>\w+)\(\) got an unexpected keyword argument '(?P<arg>\w+)'",
        "The XPU kernel {fn}() has no argument {arg}",
        "The caller passes {arg} (a speculative-decoding or newer-kernel argument) to {fn}, whose XPU version "
        "(sgl-kernel-xpu / the XPU dispatch) was written before it.",
        "Disable speculative decoding on XPU (drop --speculative-algorithm), or install an sgl-kernel-xpu that "
        "matches the sglang release; sglang #34720 tracks the conv-update case.",
        source="sglang #34720; sgl-kernel-xpu",
        near=r"xpu|sgl_kernel",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "MOE_ACTIVATION_XPU", "sglang", "error",
        r"activation = (?P<act>\w+) is not supported|Unsupported activation: (?P<act2>\w+)",
        "The XPU MoE path refuses this activation",
        "The fused-MoE forward on XPU accepts only silu and gelu before PR #31605 / #26688; a non-gated MoE "
        "(Nemotron-H's relu2) stops there although sgl-kernel-xpu's fused_experts supports relu2.",
        "Upgrade sglang (PR #31605 admits relu2 in forward_xpu); for vLLM on XPU use a release whose XPU fused "
        "MoE lists the activation.",
        source="sglang PR #31605, PR #26688 (srt/layers/quantization/unquant.py forward_xpu)",
        near=r"forward_xpu|xpu",
        supersedes=("UNRECOGNIZED_ERROR", "RELU2_MOE_UNSUPPORTED"),
    ),
    Pattern(
        "TRITON_XPU_BUILD_FAILED", "triton", "error",
        r"ZE_RESULT_ERROR_MODULE_BUILD_FAILURE|L0 build module failed|Triton Error \[ZE\]: 0x(?P<code>7[0-9a-f]{7})",
        "Triton's Intel backend failed to compile a kernel",
        "The Level Zero driver (IGC) refused the kernel Triton generated: too many registers for the default "
        "GRF mode (\"total scratch space exceeds HW supported limit\"), a sub-group size the device lacks, or a "
        "pytorch-triton-xpu that does not match torch or the driver.",
        "Install the pytorch-triton-xpu that matches your torch release, update the GPU driver, and clear "
        "~/.triton/cache; kernels that exceed the registers compile with large GRF mode (newer Triton XPU "
        "retries with 256 GRF itself, intel-xpu-backend-for-triton PR #6123).",
        source="intel/intel-xpu-backend-for-triton #5561, #3016, PR #6123; intel/torch-xpu-ops #2979",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "XPU_NATIVE_API_OOM", "torch", "error",
        r"Native API returns: (?P<code>-?\d+) \((?P<name>UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY|PI_ERROR_OUT_OF_RESOURCES|"
        r"UR_RESULT_ERROR_OUT_OF_RESOURCES)\)",
        "XPU runtime out of device memory ({name})",
        "The SYCL runtime could not allocate device memory below torch's allocator (a kernel's scratch, a "
        "oneDNN workspace or a Triton launch); torch's counters do not include it.",
        "Leave more memory unreserved: lower --mem-fraction-static (SGLang) or --gpu-memory-utilization "
        "(vLLM), shrink --chunked-prefill-size / --max-num-batched-tokens; on a Max 1550 each stack is its own "
        "64 GB device in FLAT mode.",
        source="SYCL / Unified Runtime error codes (UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)",
        supersedes=("UNRECOGNIZED_ERROR", "DEVICE_OUT_OF_MEMORY"),
    ),
)
