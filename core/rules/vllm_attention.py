"""vLLM's attention backend for a launch, and the block sizes its kernels take: which backend runs (the
one asked, XPU's resolution, else the platform's first choice), which asked backends vLLM refuses, and the
block vLLM starts from before a hybrid's alignment (core/rules/vllm.py). Facts: vllm_facts.py."""

from __future__ import annotations

from bringup.core.rules import vllm_facts as F
from bringup.core.rules.check import Check


def check_attention_backend(c: Check) -> None:
    """The backend vLLM runs and the backends it refuses (XPU's list, CUDA's MLA limits)."""
    s, r = c.s, c.r
    if s.device == "cuda" and c.m.mla:
        _cuda_mla_backend(c)
    if s.device != "xpu":
        r.attention_backend = s.attention_backend
        return
    if c.m.mla:
        _xpu_mla_backend(c)
        return
    allowed = F.XPU_ATTENTION.value
    if s.attention_backend and s.attention_backend.upper() not in allowed:
        c.add("VLLM_XPU_ATTENTION_BACKEND", "error",
              f"vLLM on XPU runs attention with {', '.join(allowed)}; {s.attention_backend} is not one of them.",
              fix="drop --attention-backend (FLASH_ATTN is the XPU default) or pass TRITON_ATTN",
              engine_message=F.XPU_INVALID_BACKEND.format(mla=c.m.mla), source=F.XPU_INVALID_BACKEND_SOURCE,
              layers=tuple(c.m.full_attention_layers), stage="model load")
        return
    float32 = (s.dtype == "float32") or (s.dtype == "auto" and c.m.config_dtype == "float32")
    # float32 runs Triton whatever was asked: vLLM tests the dtype before the FLASH_ATTN request.
    r.attention_backend = "TRITON_ATTN" if float32 else (s.attention_backend or "FLASH_ATTN").upper()
    r.why["attention_backend"] = (f"{'asked' if s.attention_backend else 'the XPU default'}"
                                  f"{' (float32 falls back to Triton)' if float32 else ''}; {F.XPU_ATTENTION.source}")


def _cuda_mla_backend(c: Check) -> None:
    s = c.s
    float32 = (s.dtype == "float32") or (s.dtype == "auto" and c.m.config_dtype == "float32")
    if float32:
        c.add("VLLM_NO_ATTENTION_BACKEND", "error", "None of vLLM's CUDA MLA attention backends runs float32.",
              fix="pass --dtype bfloat16 (or leave --dtype auto)",
              engine_message=F.NO_BACKEND_MESSAGE.format(head=c.derived.get("mla_head_size")),
              source=F.CUDA_MLA_DTYPES.source, layers=tuple(c.m.full_attention_layers), stage="model load")
    elif (s.attention_backend or "").upper() == "FLASHMLA" and s.gpu not in (None, F.FLASHMLA_HOPPER.value):
        c.add("VLLM_ATTENTION_BACKEND_INVALID", "error", "FlashMLA's dense kernel runs on Hopper only.",
              fix="drop --attention-backend, or pass TRITON_MLA", engine_message=F.FLASHMLA_MESSAGE,
              source=F.FLASHMLA_HOPPER.source, layers=tuple(c.m.full_attention_layers), stage="model load")


def _xpu_mla_backend(c: Check) -> None:
    s = c.s
    if s.attention_backend and s.attention_backend.upper() not in F.XPU_MLA_ATTENTION.value:
        c.add("VLLM_XPU_ATTENTION_BACKEND", "error",
              f"vLLM on XPU runs MLA attention with {', '.join(F.XPU_MLA_ATTENTION.value)}; {s.attention_backend} is "
              "not one of them.", fix="drop --attention-backend or pass TRITON_MLA",
              engine_message=F.XPU_INVALID_BACKEND.format(mla=True), source=F.XPU_MLA_ATTENTION.source,
              layers=tuple(c.m.full_attention_layers), stage="model load")
        return
    c.r.attention_backend = s.attention_backend.upper() if s.attention_backend else None


def _backend(c: Check) -> str | None:
    """The attention backend vLLM runs: the one asked (or XPU's resolution), else the platform's first choice."""
    s = c.s
    if c.r.attention_backend:
        return c.r.attention_backend.upper()
    if c.m.mla:
        return None  # the platform's MLA choice; its blocks are aligned to MLA_BLOCK_ALIGNMENT anyway
    return F.DEFAULT_ATTENTION.value.get("blackwell" if s.device == "cuda" and s.gpu == "blackwell" else s.device)


def kernel_block(c: Check) -> int:
    """The smallest block the backend's kernels take."""
    if _fa4_hd256(c):
        return F.FA4_HD256_BLOCK.value
    return F.KERNEL_BLOCK.value.get((c.s.device, _backend(c)), F.KERNEL_BLOCK_ALIGNMENT.value)


def _fa4_hd256(c: Check) -> bool:
    """FlashAttention 4's head-256 kernel: FLASH_ATTN on Blackwell with 256-wide heads."""
    s = c.s
    return s.device == "cuda" and s.gpu == "blackwell" and _backend(c) == "FLASH_ATTN" and c.derived.get("head_dim") == 256


def starting_block(c: Check) -> None:
    """The block vLLM starts from without --block-size: the backend's preferred one (the release's default,
    16 to 0.33 and 64 from 0.34, where its kernels take it; FlashAttention on XPU 64; ROCM_ATTN 16; the CPU
    platform 128). Hybrids are aligned from there."""
    s, r = c.s, c.r
    if s.page_size is not None:
        return
    preferred = F.FA4_HD256_BLOCK.value if _fa4_hd256(c) else F.PREFERRED_BLOCK.value.get((s.device, _backend(c)))
    if preferred is None:
        kernel = kernel_block(c)
        default = F.default_block_size(c.derived["version"]).value
        preferred = default if default % kernel == 0 else kernel
    if preferred != r.page_size:
        r.page_size = preferred
        r.why["page_size"] = f"the {_backend(c)} backend's preferred block on {s.device} ({F.PREFERRED_BLOCK.source})"
