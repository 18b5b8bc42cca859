"""SGLang attention-backend rules: defaults and page-size snaps, backends that probe layer 0 of a pool
holding only attention layers (the PR #32227 crash), LFM2 with triton, per-device restrictions."""

from __future__ import annotations

from bringup.core.rules import messages as msg
from bringup.core.rules import sglang_archs as archs
from bringup.core.rules import sglang_backends as backends
from bringup.core.rules.check import Check
from bringup.core.rules.profiles import versions_where

def check_model_hook(c: Check) -> None:
    """The model adjustments' asserts, met before the mamba strategy checks and before the default
    backend is filled in (so only an explicit --attention-backend triton is refused)."""
    m, s, p = c.m, c.s, c.profile
    refusal = p.triton_refusal(m.architecture) if s.attention_backend == "triton" else None
    if refusal is None:
        return
    accepts = versions_where(lambda q: q.triton_refusal(m.architecture) is None)
    if archs.short_conv(m):
        fix = "use --attention-backend intel_xpu on XPU, or flashinfer / fa3 on CUDA"
    else:
        fix = (f"drop --attention-backend (sglang {p.label} fills in triton by default after this check, and "
               + ("PR #32227's triton fix is in this release" if not p.triton_probes_layer0 else
                  "then meets the layer-0 probe") + f"), use --attention-backend intel_xpu on XPU, or sglang "
               f"{accepts} (no such check for {m.architecture})")
    c.add("TRITON_REFUSED_FOR_MODEL", "error",
          f"{m.architecture}'s first layer is {m.first_layer_mixer}, not attention, and sglang {p.label} refuses an "
          "explicit triton attention backend for it.",
          fix=fix, engine_message=f"AssertionError: {refusal}", layers=(0,),
          source=f"{p.source('triton_refused')} (model-specific adjustments)", stage="arguments")


TRTLLM_PREFILL_SM100_ONLY = ("0.5.17", "0.5.18")  # server_args.py:5801 (0.5.17) raises on a non-SM100 GPU


def resolve_backend(c: Check) -> None:
    """handle_attention_backend_compatibility: fill the default backend, then snap the page size."""
    m, s, r = c.m, c.s, c.r
    if s.attention_backend:
        r.attention_backend = s.attention_backend
        r.why["attention_backend"] = "--attention-backend"
    else:
        backend, why = backends.default_backend(m, s, c.profile.label if c.profile else None)
        r.attention_backend = backend
        r.why["attention_backend"] = why
        if backend:
            c.add("ATTENTION_BACKEND_DEFAULT", "info", f"No --attention-backend: {backend} ({why}).",
                  engine_message=msg.DEFAULT_BACKEND.format(backend=backend), source=backends.SOURCE)
    if r.attention_backend == "intel_xpu" and s.device == "xpu" and s.xmx is False:
        c.add("INTEL_XPU_NO_XMX", "warning", "This XPU has no XMX matrix engines, so intel_xpu falls back to triton.",
              fix="expect triton's speed and rules", engine_message=msg.NO_XMX,
              source="arg_groups attention_hook (xpu_has_xmx_support)", stage="arguments")
        r.attention_backend = "triton"
        r.why["attention_backend"] = "intel_xpu asked, but no XMX: triton"
    backend = r.attention_backend
    # 0.5.17-0.5.18 refuse it in the arguments; 0.5.19 on accept it there (the oracle's tables, tools/oracle).
    if backend == "trtllm_mha" and s.device == "cuda" and s.gpu not in ("blackwell", None) and \
            c.profile is not None and c.profile.label in TRTLLM_PREFILL_SM100_ONLY:
        c.add("TRTLLM_MHA_NOT_BLACKWELL", "error", "trtllm_mha runs prefill only on Blackwell (SM100) GPUs.",
              fix="use fa3 or flashinfer on this GPU", engine_message=msg.TRTLLM_NOT_BLACKWELL,
              source="server_args.py _handle_attention_backend_compatibility (0.5.17: :5801); found by tools/oracle",
              stage="arguments")
    if backend and backend not in backends.BACKENDS.get(s.device, ()):
        c.add("ATTENTION_BACKEND_DEVICE", "warning",
              f"The {backend} attention backend is not known to run on {s.device}; backends checked there: "
              f"{', '.join(backends.BACKENDS.get(s.device, ())) or 'none'}.",
              fix=f"pick one of: {', '.join(backends.BACKENDS.get(s.device, ()))}", source=backends.SOURCE)
    snap = backends.page_snap(backend, s.page_size, m.mla)
    if snap:
        new, why = snap
        old = s.page_size
        r.page_size = new
        r.why["page_size"] = f"{why}: changed from {old if old is not None else 'the default 1'} to {new}"
        p = c.profile
        xpu_text = p.intel_xpu_page_message_mla if m.mla else p.intel_xpu_page_message
        c.add("PAGE_SIZE_SNAPPED", "info" if old is None else "warning", f"Page size {r.why['page_size']}.",
              fix=f"pass --page-size {new} to say it yourself",
              engine_message=xpu_text.format(old=old) if backend == "intel_xpu" else "",
              source=(f"{p.source('intel_xpu_page_message')} (_intel_xpu_page_constraint)" if backend == "intel_xpu"
                      else backends.SOURCE), stage="arguments")
        if r.mamba_strategy == "no_buffer" and s.page_size is None:
            c.add("NO_BUFFER_PAGE_AFTER_SNAP", "warning",
                  f"Ordering trap: the strategy checks ran first (no_buffer, page 1 passed) and {backend} then set page_size "
                  f"{new}. no_buffer with page {new} was never validated by the engine; read from the code, not tested.",
                  fix="use --disable-radix-cache (the known-good XPU recipe, PR #24390)",
                  source="arg_groups/pipeline.py order: handle_model_specific_adjustments before "
                         "handle_attention_backend_compatibility", stage="arguments")
        if r.mamba_strategy == "no_buffer" and backend == "trtllm_mha" and s.attention_backend is None \
                and not c.has("NO_BUFFER_TRTLLM"):
            c.add("NO_BUFFER_TRTLLM", "warning", "The default backend trtllm_mha does not work with no_buffer.",
                  fix="use extra_buffer or --disable-radix-cache", engine_message="AssertionError: " + c.profile.no_buffer_messages[2],
                  source=c.profile.where)
    if s.attention_backend is None and backend == "triton" and archs.short_conv(m) and c.profile.triton_refusal(m.architecture):
        c.add("TRITON_DEFAULT_FOR_MODEL", "warning",
              f"triton becomes the default on {s.device}, but SGLang says {m.architecture} does not support triton "
              "(its first layer might not be attention). The refusal is checked before the default is filled, so it "
              "may not fire; the backend is still wrong for this model.",
              fix="pass --attention-backend intel_xpu (XPU) or another non-triton backend",
              engine_message="AssertionError: " + c.profile.triton_refusal(m.architecture), layers=(0,),
              source=f"{c.profile.source('triton_refused')}; sglang-notes §1.2 (LFM2 on XPU needs an explicit backend)")


def check_startup(c: Check) -> None:
    """What the chosen backend does when the engine builds it."""
    m, s, r = c.m, c.s, c.r
    backend = r.attention_backend
    if backend == "torch_native":
        c.add("TORCH_NATIVE_NO_GRAPH", "info", "torch_native attention disables CUDA graphs: expect slow decode.",
              engine_message=msg.TORCH_NATIVE_GRAPH, source="server_args")
    _layer0_probe(c, backend)
    sm100, _sm120, form = c.profile.gdn_blackwell_backends
    if s.device == "cuda" and s.gpu == "blackwell" and m.family == "gdn" and backend not in sm100:
        # SGLang prints a Python set: its order varies from run to run; sorted here.
        allowed = "{" + ", ".join(map(repr, sm100)) + "}"
        got = f"attention_backend={backend}" if form == "attention_backend" else f"prefill={backend}, decode={backend}"
        since = versions_where(lambda q: backend in q.gdn_blackwell_backends[0])
        c.add("GDN_BLACKWELL_BACKEND", "error",
              f"Hybrid GDN models on Blackwell (SM100) run only with {', '.join(sm100)} in {c.version}.",
              fix="use --attention-backend triton" + (f", or sglang {since} (which accept {backend})"
                                                       if since != "no profiled release" else ""),
              engine_message=f"AssertionError: Only {allowed} backends are supported on Blackwell GPUs for hybrid GDN "
                             f"models. Got {got}.",
              source=f"{c.profile.source('gdn_blackwell_backends')} (attention backend creation)", stage="start-up")
    if s.device == "npu" and m.family == "gdn" and backend != "ascend":
        c.add("GDN_NPU_BACKEND", "error", "Hybrid GDN models on NPU run only with the ascend backend.",
              fix="add --attention-backend ascend", engine_message=msg.GDN_NPU, source="arg_groups model overrides",
              stage="arguments")
    if s.device == "npu" and archs.short_conv(m):
        c.add("SHORT_CONV_NPU", "error", "SGLang has no short-conv (LFM2 / Zaya) kernels for NPU.",
              fix="use another device", engine_message=msg.SHORT_CONV_NPU, layers=tuple(m.state_layers),
              source="ShortConvAttnBackend", stage="start-up")
    if s.linear_attn_backend == "intel_xpu" and s.device != "xpu":
        c.add("LINEAR_BACKEND_DEVICE", "error", "--linear-attn-backend intel_xpu runs only on Intel XPU.",
              fix="drop --linear-attn-backend", engine_message=msg.LINEAR_XPU_DEVICE,
              source="hardware_backend/xpu/attention/xpu_gdn_backend.py", stage="start-up")
    if backend == "intel_xpu" and m.is_hybrid and r.radix_cache:
        c.add("XPU_RECIPE", "info", "Known-good XPU launch for hybrids: --device xpu --attention-backend intel_xpu "
              "--disable-radix-cache (PR #24390 reached GSM8K parity with it at tp=4).",
              fix="add --disable-radix-cache", source="PR #24390")


def _layer0_probe(c: Check, backend: str | None) -> None:
    """triton (before PR #32227, for Mamba2 hybrids) and wave (still in 0.5.23) read the value buffer of
    layer 0 to learn v_head_dim; a hybrid pool maps only attention layers, so layer 0 must be one of them."""
    m, p = c.m, c.profile
    if not archs.hybrid_kv_pool(m) or m.mla or c.has("TRITON_REFUSED_FOR_MODEL"):
        return
    # Before PR #32227 triton already asked the pool for v_head_dim when hybrid_gdn_config,
    # kimi_linear_config or a linear-attention spec was set; only mamba2_config models fell through
    # to get_value_buffer(0). The PR widened the check to mambaish_config.
    if backend == "triton" and p.triton_probes_layer0 and m.family == "mamba2":
        fixed = versions_where(lambda q: not q.triton_probes_layer0)
        code, where, fix = ("TRITON_LAYER0_PROBE", f"{p.source('triton_probes_layer0')}: get_value_buffer(0)",
                            f"upgrade to sglang {fixed} (PR #32227 asks the pool for get_v_head_dim()), "
                            "or use --attention-backend intel_xpu on XPU")
    elif backend == "wave":
        code, where, fix = ("WAVE_LAYER0_PROBE", "layers/attention/wave_backend.py: get_value_buffer(0) (issues #22605, #23080)",
                            "use --attention-backend aiter or triton on ROCm")
    else:
        return
    valid = m.attention_layers_of_stage(0)
    if 0 in valid:
        return
    c.add(code, "error",
          f"The {backend} backend asks the KV pool for layer 0 to learn the value head size, but layer 0 is "
          f"{m.first_layer_mixer}: the hybrid KV pool holds only the attention layers {valid}.",
          fix=fix, engine_message=msg.LAYER_ID.format(layer=0, layers=list(valid)), layers=(0, *valid),
          source=f"{where}; mem_cache/memory_pool.py HybridLinearKVPool._transfer_full_attention_id; PR #32227",
          stage="start-up (attention backend init)", requested_layer=0, valid_layers=tuple(valid))
