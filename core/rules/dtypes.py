"""Dtype choices: model dtype, KV cache dtype and the recurrent state dtypes (notes §2.4)."""

from __future__ import annotations

from bringup.core.rules.check import Check

# Families whose SGLang config ignores the config's mamba_ssm_dtype (only the env/flag/default count).
_SSM_DTYPE_FROM_CONFIG_IGNORED = ("KimiLinear", "GraniteMoeHybrid")


def resolve_dtypes(c: Check, *, conv_default: str = "bfloat16") -> None:
    m, s, r = c.m, c.s, c.r
    if s.dtype == "auto":
        r.dtype = m.config_dtype if m.config_dtype in ("bfloat16", "float16", "float32") else "bfloat16"
        r.why["dtype"] = f"auto: the config's {m.config_dtype}" if m.config_dtype else "auto: bfloat16 (the config names none)"
    else:
        r.dtype = s.dtype
    r.kv_dtype = r.dtype if s.kv_dtype == "auto" else s.kv_dtype
    if not m.is_hybrid:
        r.mamba_ssm_dtype = r.mamba_conv_dtype = None
        if s.mamba_ssm_dtype:
            c.add("SSM_DTYPE_IGNORED", "info", f"{m.name} keeps no recurrent state; --mamba-ssm-dtype does nothing.")
        return
    r.mamba_conv_dtype = conv_default
    if s.mamba_ssm_dtype:
        r.mamba_ssm_dtype = s.mamba_ssm_dtype
        r.why["mamba_ssm_dtype"] = "--mamba-ssm-dtype"
    elif m.config_ssm_dtype and not m.architecture.startswith(_SSM_DTYPE_FROM_CONFIG_IGNORED):
        r.mamba_ssm_dtype = m.config_ssm_dtype
        r.why["mamba_ssm_dtype"] = "the config's mamba_ssm_dtype"
    else:
        r.mamba_ssm_dtype = "float32"
        r.why["mamba_ssm_dtype"] = "default float32"


# _gpt_oss_overrides raises on XPU for a --dtype other than auto or bfloat16, in every profiled release.
_GPT_OSS_XPU_DTYPE_SOURCE = {
    "0.5.17": "arg_groups/overrides.py:900", "0.5.18": "arg_groups/overrides.py:956",
    "0.5.19": "arg_groups/model_overrides/gpt_oss.py:57", "0.5.20": "arg_groups/model_overrides/gpt_oss.py:57",
    "0.5.21": "arg_groups/model_overrides/gpt_oss.py:52", "0.5.22": "arg_groups/model_overrides/gpt_oss.py:52",
    "0.5.23": "arg_groups/model_overrides/gpt_oss.py:52",
}


def check_sglang_model_dtype(c: Check) -> None:
    """The model overrides' dtype refusals (met in the model-specific adjustments)."""
    s = c.s
    if c.m.architecture != "GptOssForCausalLM" or s.device != "xpu" or s.dtype in ("auto", "bfloat16"):
        return
    where = _GPT_OSS_XPU_DTYPE_SOURCE.get(c.profile.label, "arg_groups/model_overrides/gpt_oss.py")
    c.add("GPT_OSS_XPU_DTYPE", "error", f"gpt-oss on Intel XPU runs only in bfloat16; --dtype {s.dtype} is refused.",
          fix="pass --dtype bfloat16, or drop --dtype (auto)",
          engine_message=(f"NotImplementedError: GptOssForCausalLM on Intel XPU only supports bfloat16 dtype, but got "
                          f"'{s.dtype}'. Please use --dtype bfloat16 or remove --dtype to use auto."),
          source=f"python/sglang/srt/{where} (_gpt_oss_overrides)", stage="arguments")


def check_sglang_dtypes(c: Check) -> None:
    m, s, r = c.m, c.s, c.r
    if not m.is_hybrid:
        return
    if r.mamba_ssm_dtype == "float16" and s.device == "xpu" and m.family == "gdn":
        c.add("XPU_GDN_FP16_STATE", "warning",
              "float16 SSM state with XPU's fused gated-DeltaNet kernels drifts from the reference.",
              fix="keep --mamba-ssm-dtype float32 (or bfloat16); if you must, set SGLANG_XPU_GDN_ESIMD=0 and "
                  "SGLANG_XPU_GDN_EXTEND_ESIMD=0", layers=tuple(m.state_layers), source="intel/llm-scaler#559")
    if r.mamba_ssm_dtype in ("bfloat16", "float16"):
        c.add("SSM_DTYPE_HALF", "info",
              f"{r.mamba_ssm_dtype} SSM state halves the state memory per request (more concurrent requests) at some "
              "precision cost over long generations.", layers=tuple(m.state_layers), source="SGLANG_MAMBA_SSM_DTYPE")
