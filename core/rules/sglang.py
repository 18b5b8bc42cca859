"""All SGLang rules for one launch, in the order SGLang itself applies them: architecture support,
dtypes, the mamba radix cache strategy (model_hook), the attention backend default and page-size
snaps, then what the backends and parallel layout do at start-up."""

from __future__ import annotations

from bringup.core.rules import sglang_archs as archs
from bringup.core.rules import messages as msg
from bringup.core.rules.check import Check
from bringup.core.rules.dtypes import check_sglang_dtypes, check_sglang_model_dtype, resolve_dtypes
from bringup.core.rules.model_facts import ModelFacts
from bringup.core.rules.parallel import check_pp, check_tp
from bringup.core.rules.profiles import SglangProfile, versions_where
from bringup.core.rules.settings import LaunchSettings, Resolved
from bringup.core.rules.sglang_attention import check_model_hook, check_startup, resolve_backend
from bringup.core.rules.sglang_mamba import check_mamba_strategy, check_state_slots


def check_sglang(m: ModelFacts, s: LaunchSettings, profile: SglangProfile) -> Check:
    r = Resolved(
        device=s.device, attention_backend=None, page_size=s.page_size or 1, tp=s.tp, pp=s.pp, dtype=s.dtype,
        kv_dtype=s.kv_dtype, mamba_ssm_dtype=None, mamba_conv_dtype=None, radix_cache=not s.disable_radix_cache,
        overlap_schedule=not s.disable_overlap_schedule,
        linear_attn_backend=(s.linear_attn_backend or "triton") if m.family in ("gdn", "kimi_linear", "linear_attn") else None,
    )
    c = Check(m, s, r, profile)
    if s.device == "rocm":
        r.why["device"] = "a ROCm build of torch: SGLang's --device cuda"
    _check_choices(c)
    _check_architecture(c)
    resolve_dtypes(c)
    check_sglang_model_dtype(c)
    # The architecture branch's asserts (triton refusal) come before handle_mamba_radix_cache in the
    # model adjustments of every release (server_args.py 0.5.17-0.5.18, arg_groups/model_hook.py later).
    check_model_hook(c)
    # Even for an architecture SGLang lacks: 0.5.21 on refuse an explicit extra_buffer on a non-mamba
    # arch in handle_mamba_radix_cache (arg_groups/model_hook.py:951 in 0.5.21), before the model loads.
    check_mamba_strategy(c)
    _pipeline_overlap(c)
    resolve_backend(c)
    check_state_slots(c)
    check_startup(c)
    check_tp(c)
    check_pp(c)
    check_sglang_dtypes(c)
    from bringup.core.rules.sglang_quantization import check_quantization

    check_quantization(c)
    return c


def _check_choices(c: Check) -> None:
    """What argparse refuses before anything else runs: a --linear-attn-backend this release lacks."""
    p, wanted = c.profile, c.s.linear_attn_backend
    if wanted is None or wanted in p.linear_attn_backends:
        return
    since = versions_where(lambda q: wanted in q.linear_attn_backends)
    c.add("LINEAR_BACKEND_UNKNOWN", "error",
          f"sglang {p.label} has no --linear-attn-backend {wanted}; its choices are {', '.join(p.linear_attn_backends)}.",
          fix=f"use sglang {since}, or drop --linear-attn-backend (triton)",
          engine_message=(f"error: argument --linear-attn-backend: invalid choice: '{wanted}' (choose from "
                          + ", ".join(repr(b) for b in p.linear_attn_backends) + ")"),
          source=p.source("linear_attn_backends"), stage="arguments")


def _check_architecture(c: Check) -> None:
    m = c.m
    if archs.not_implemented(m):
        c.add("ARCH_NOT_IMPLEMENTED", "error",
              f"SGLang has no implementation of {m.architecture} (no model or config file; read in 0.5.23).",
              fix="serve it with another engine, or pick a supported hybrid (NemotronH, Falcon-H1, Qwen3-Next, LFM2...)",
              source="sglang-notes §1.2 (Jamba, Bamba and Zamba are not implemented)", stage="model load")
    elif m.is_hybrid and not archs.hybrid_kv_pool(m):
        c.add("ARCH_UNKNOWN_HYBRID", "warning",
              f"{m.architecture or m.model_type} keeps recurrent state, but it is not in SGLang's hybrid architecture "
              "lists (configs/hybrid_arch.py), so its state cache rules cannot be predicted here.",
              fix="check that SGLang supports this architecture; out-of-tree hybrids register through "
                  "register_linear_attn_model()", engine_message=msg.UNKNOWN_HYBRID,
              layers=tuple(m.state_layers), source="configs/hybrid_arch.py; layers/attention/attention_registry.py")


def _pipeline_overlap(c: Check) -> None:
    """PP switches the overlap schedule off (after the model adjustments, so auto's choice stands)."""
    if c.s.pp > 1 and c.r.overlap_schedule:
        c.r.overlap_schedule = False
        c.r.why["overlap_schedule"] = "--pp-size > 1 switches it off"
        c.add("PP_DISABLES_OVERLAP", "info", "Pipeline parallelism switches the overlap schedule off.",
              engine_message=msg.PP_OVERLAP, source="server_args _handle_pipeline_parallelism / arg_groups "
              "_pipeline_parallel_overlap_disable")
