"""What the user asks the engine for (`LaunchSettings`) and what the engine makes of it (`Resolved`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from bringup.core.errors import UserError
from bringup.core.rules.sglang_backends import CHOICES

DEVICES = ("cuda", "rocm", "xpu", "npu", "cpu", "mps")  # rocm = a ROCm build of torch (SGLang: --device cuda)
MAMBA_STRATEGIES = ("auto", "no_buffer", "extra_buffer", "extra_buffer_lazy")
DTYPES = ("auto", "bfloat16", "float16", "float32")
KV_DTYPES = ("auto", "bfloat16", "fp8_e4m3", "fp8_e5m2")
SSM_DTYPES = ("float32", "bfloat16", "float16")
LINEAR_BACKENDS = ("triton", "cutedsl", "flashinfer", "flashkda", "nvidia_kda", "ptx_kda", "helion", "intel_xpu")
# vLLM's attention backend names (AttentionBackendEnum; the XPU ones in vllm/platforms/xpu.py:191-271)
VLLM_ATTENTION_BACKENDS = ("FLASH_ATTN", "TRITON_ATTN", "TRITON_FLASH_ATTN", "FLASHINFER", "TORCH_SDPA", "ROCM_ATTN",
                           "TRITON_MLA", "FLASH_ATTN_MLA", "FLASHMLA")
GPU_GENERATIONS = ("hopper", "blackwell", "other")  # decides SGLang's default CUDA attention backend


@dataclass(frozen=True)
class LaunchSettings:
    device: str = "cuda"
    attention_backend: str | None = None  # None: the engine's default for the device
    mamba_strategy: str = "auto"
    page_size: int | None = None  # None: the engine's default
    tp: int = 1
    pp: int = 1
    disable_radix_cache: bool = False
    disable_overlap_schedule: bool = False
    dtype: str = "auto"
    kv_dtype: str = "auto"
    mamba_ssm_dtype: str | None = None  # None: config's mamba_ssm_dtype, else float32
    linear_attn_backend: str | None = None  # SGLang --linear-attn-backend (default triton)
    gpu: str | None = None  # CUDA GPU generation, when known (hopper | blackwell | other)
    xmx: bool | None = None  # XPU has XMX matrix engines (from the probe), when known

    def __post_init__(self) -> None:
        check_settings(self)

    def with_(self, **changes) -> "LaunchSettings":
        return replace(self, **changes)

    def to_json(self) -> dict:
        return asdict(self)


def check_settings(s: LaunchSettings) -> None:
    """Reject values no engine could mean, with what to pass instead."""
    def choice(flag: str, value, allowed) -> None:
        if value not in allowed:
            raise UserError(f"{flag} {value!r} is not one of {', '.join(allowed)}; pick one of those")

    choice("--device", s.device, DEVICES)
    if s.attention_backend is not None:
        choice("--attention-backend", s.attention_backend, tuple(CHOICES) + VLLM_ATTENTION_BACKENDS)
    if s.linear_attn_backend is not None:
        choice("--linear-attn-backend", s.linear_attn_backend, LINEAR_BACKENDS)
    choice("--mamba-strategy", s.mamba_strategy, MAMBA_STRATEGIES)
    choice("--dtype", s.dtype, DTYPES)
    choice("--kv-dtype", s.kv_dtype, KV_DTYPES)
    if s.mamba_ssm_dtype is not None:
        choice("--mamba-ssm-dtype", s.mamba_ssm_dtype, SSM_DTYPES)
    if s.gpu is not None:
        choice("--gpu", s.gpu, GPU_GENERATIONS)
    for flag, value in (("--tp", s.tp), ("--pp", s.pp)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UserError(f"{flag} {value!r} must be a positive integer, e.g. {flag} 2")
    if s.page_size is not None and (isinstance(s.page_size, bool) or not isinstance(s.page_size, int) or s.page_size < 1):
        raise UserError(f"--page-size {s.page_size!r} must be a positive integer (tokens per KV page), e.g. --page-size 64")


@dataclass
class Resolved:
    """Settings after the target's own auto-resolution; `why` says where each non-obvious value came from."""

    device: str
    attention_backend: str | None
    page_size: int
    tp: int
    pp: int
    dtype: str
    kv_dtype: str
    mamba_ssm_dtype: str | None
    mamba_conv_dtype: str | None
    radix_cache: bool
    overlap_schedule: bool
    mamba_radix_cache: bool = False  # the target routes state through its mamba radix cache
    mamba_strategy: str | None = None  # no_buffer | extra_buffer | extra_buffer_lazy | None (not used)
    linear_attn_backend: str | None = None
    state_slots_per_request: int | None = None  # SGLang's mamba_ratio (1, 3, 4 or 5); None without state
    why: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return asdict(self)
