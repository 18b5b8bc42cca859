"""SGLang's attention backends per device, their defaults and the page sizes they force (notes §4.1-§4.2)."""

from __future__ import annotations

from bringup.core.rules.model_facts import ModelFacts

# Backends worth checking per device (the compatibility matrix's columns). A backend named for a
# device outside its list gets a "not known to run there" warning, not an invented error.
BACKENDS: dict[str, tuple[str, ...]] = {
    "cuda": ("fa3", "flashinfer", "triton", "trtllm_mha", "torch_native"),
    "rocm": ("aiter", "triton", "wave"),
    "xpu": ("triton", "intel_xpu"),
    "npu": ("ascend",),
    "cpu": ("intel_amx", "torch_native"),
    "mps": ("torch_native",),
}
ALL_BACKENDS = tuple(dict.fromkeys(b for bs in BACKENDS.values() for b in bs))
# --attention-backend choices (arg_groups/choices.py, 0.5.23; the minicpm_* ones left out).
CHOICES = ("triton", "torch_native", "flex_attention", "dsa", "nsa", "dsv4", "compressed", "cutlass_mla", "fa3", "fa4",
           "flashinfer", "llada2_cfg_flashinfer", "flashmla", "trtllm_mla", "cutedsl_mla", "tokenspeed_mla", "trtllm_mha",
           "hpc_ops", "aiter", "wave", "intel_amx", "ascend", "intel_xpu")
SGLANG_DEVICE = {"rocm": "cuda"}  # what --device says for a ROCm build of torch

SOURCE = "python/sglang/srt/arg_groups/model_override_base.py::get_default_attn_backend"


# Releases whose NemotronH overrides set flashinfer on SM100 when no backend is given (_nemotron_h_overrides:
# arg_groups/overrides.py:1230 in 0.5.17, :1308 in 0.5.18); 0.5.19 on set trtllm_mha there instead
# (arg_groups/model_overrides/nemotron_h.py:122 in 0.5.19, :132 in 0.5.20, :128 in 0.5.21-0.5.22, :148 in 0.5.23).
# Found by the oracle (tools/oracle).
NEMOTRON_H_SM100_FLASHINFER = ("0.5.17", "0.5.18")


def override_backend(m: ModelFacts, s, release: str | None = None) -> tuple[str, str] | None:
    """(backend, why) when the model's own override picks the backend (no --attention-backend given), else None.
    The overrides run in the model-specific adjustments, before the mamba strategy is validated (0.5.19:
    arg_groups/model_hook.py:116 collects them, :568 validates), so no_buffer's checks see their pick; the
    general default (get_default_attn_backend) is filled in later."""
    arch = m.architecture
    if arch == "GptOssForCausalLM" and (s.device == "xpu" or (s.device == "cuda" and s.gpu == "other")):
        return _gpt_oss_backend(s.device)
    if s.device != "cuda" or s.gpu != "blackwell" or m.mla:
        return None
    if arch.startswith(("FalconH1", "JetNemotron", "JetVLM")):
        return "triton", f"{arch} override on SM100"
    if arch.startswith(("Lfm2", "GraniteMoeHybrid")):
        return "flashinfer", f"{arch} override on SM100"
    if arch.startswith("NemotronH"):
        return ("flashinfer" if release in NEMOTRON_H_SM100_FLASHINFER else "trtllm_mha"), f"{arch} override on SM100"
    if arch.startswith(("Qwen3Next", "Qwen3_5", "InternS2")):
        return _qwen3_5_sm100_backend(m, s)
    return None


def default_backend(m: ModelFacts, s, release: str | None = None) -> tuple[str | None, str]:
    """(backend, why) for the launch `s` (LaunchSettings). None when the source read does not say (NPU).
    `release`: the profile's label."""
    device, gpu = s.device, s.gpu
    picked = override_backend(m, s, release)
    if picked:
        return picked
    if device == "cuda":
        gen = gpu or "hopper"
        assumed = "" if gpu else " (GPU generation unknown: Hopper assumed; pass --gpu)"
        if gen == "hopper":
            return "fa3", "default on Hopper (CUDA >= 12.3, no speculative decoding)" + assumed
        if gen == "blackwell":
            if m.mla:
                return "flashinfer", "default for MLA models on SM100"
            return "trtllm_mha", "default on SM100 (Blackwell)"
        return ("triton" if m.mla else "flashinfer"), "default on other CUDA GPUs"
    if device == "rocm":
        if m.mla:
            return _rocm_mla_backend(m, s.tp)
        return "aiter", "default on ROCm (HIP)"
    if device == "xpu":
        return "triton", "XPU has no flashinfer, so the default is triton; intel_xpu is opt-in"
    if device == "mps":
        return "torch_native", "default on MPS"
    if device == "cpu":
        return "intel_amx", "default on CPU (server_args _handle_cpu_backends)"
    return None, "the SGLang source read does not say NPU's default; pass --attention-backend ascend"


def _gpt_oss_backend(device: str) -> tuple[str, str]:
    """_gpt_oss_overrides picks gpt-oss's backend itself in every profiled release (arg_groups/overrides.py:886 in
    0.5.17, :939 in 0.5.18, model_overrides/gpt_oss.py:40 in 0.5.19-0.5.20, :37 in 0.5.21-0.5.23): trtllm_mha on
    SM100, fa3 on SM90, intel_amx on an AMX CPU, aiter on ROCm (the general defaults), but intel_xpu on XPU and
    triton on other CUDA GPUs (:890 / :946 / gpt_oss.py:47, :44). Found by the oracle (tools/oracle)."""
    if device == "xpu":
        return "intel_xpu", "GptOssForCausalLM override on XPU"
    return "triton", "GptOssForCausalLM override on CUDA GPUs other than SM90/SM100"


def _qwen3_5_sm100_backend(m: ModelFacts, s) -> tuple[str, str]:
    """_qwen3_5_hybrid_overrides on SM100: trtllm_mha (page 64) unless page 1 is required, which it is only with
    the radix cache on, no extra_buffer strategy and no speculative decoding (none here); else triton (page 1).
    The strategy is read as given: auto is not yet extra_buffer there (the oracle's auto cells get triton).
    arg_groups/overrides.py:1256 in 0.5.17, :1335 in 0.5.18, model_overrides/qwen3_5.py:45 in 0.5.19-0.5.20,
    :40 in 0.5.21-0.5.23. Found by the oracle (tools/oracle)."""
    if s.disable_radix_cache or s.mamba_strategy in ("extra_buffer", "extra_buffer_lazy"):
        why = "--disable-radix-cache" if s.disable_radix_cache else f"the {s.mamba_strategy} strategy"
        return "trtllm_mha", f"{m.architecture} override on SM100 ({why}: page size 1 is not required)"
    return "triton", f"{m.architecture} override on SM100 (radix cache without extra_buffer needs page size 1)"


def _rocm_mla_backend(m: ModelFacts, tp: int) -> tuple[str, str]:
    """MLA on ROCm: aiter only for 16 or 128 KV heads per GPU (get_num_kv_heads(tp): the config's
    num_key_value_heads // tp, at least 1), else triton: server_args.py:5718 in 0.5.17, :5933 in 0.5.18,
    arg_groups/model_override_base.py:337 in 0.5.19, :359 in 0.5.20, :311 in 0.5.21, :332 in 0.5.22, :342 in 0.5.23.
    Found by the oracle (Kimi-Linear: 32 heads at TP 1, triton)."""
    heads = max(1, (m.kv_heads or m.attention_heads or 0) // tp)
    if heads in (16, 128):
        return "aiter", f"default for MLA models on ROCm with {heads} KV heads per GPU"
    return "triton", f"MLA on ROCm: aiter takes 16 or 128 KV heads per GPU, this launch has {heads}"


def page_snap(backend: str | None, page_size: int | None, mla: bool) -> tuple[int, str] | None:
    """(new page size, why) when the backend forces one, else None."""
    if backend == "intel_xpu":
        allowed = (16, 32, 64, 128) if mla else (64, 128)
        if page_size not in allowed:
            return 128, "intel_xpu only supports page sizes " + "/".join(map(str, allowed))
    if backend == "trtllm_mha" and page_size not in (16, 32, 64, 128):
        return 64, "trtllm_mha only supports page sizes 16/32/64/128"
    return None
