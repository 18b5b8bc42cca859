"""Rules of our own engine (core/engine/): what it really implements, from the engine's own facts
(core/engine/facts.py, which imports no torch, so validation never pays for importing it)."""

from __future__ import annotations

from bringup.core.engine import facts
from bringup.core.rules.check import Check
from bringup.core.rules.dtypes import resolve_dtypes
from bringup.core.rules.model_facts import ModelFacts
from bringup.core.rules.settings import LaunchSettings, Resolved

SOURCE = "core/engine/"


def engine_model_types() -> tuple[str, ...]:
    """model_type values the embedded engine implements."""
    return tuple(facts.supported_model_types())


def check_embedded(m: ModelFacts, s: LaunchSettings) -> Check:
    r = Resolved(device=s.device, attention_backend=None, page_size=s.page_size or facts.DEFAULT_PAGE_SIZE, tp=s.tp, pp=s.pp,
                 dtype=s.dtype, kv_dtype=s.kv_dtype, mamba_ssm_dtype=None, mamba_conv_dtype=None, radix_cache=False,
                 overlap_schedule=False, state_slots_per_request=1 if m.is_hybrid else None)
    r.why["attention_backend"] = "the engine's own kernels: plain-torch reference everywhere, faster ones per device (kernels/dispatch.py)"
    if s.page_size is None:
        r.why["page_size"] = f"the engine's default page size {facts.DEFAULT_PAGE_SIZE}"
    c = Check(m, s, r)
    supported = engine_model_types()
    if m.model_type not in supported:
        c.add("EMBEDDED_MODEL_UNSUPPORTED", "error",
              f"The embedded engine has no implementation of model_type {m.model_type!r}; it runs {', '.join(supported)}.",
              fix="serve this model with SGLang (--target sglang==X.Y.Z), or pick a supported model",
              engine_message="UnsupportedModelError: " + facts.unsupported_model_message(m.model_type, m.architecture),
              source="core/engine/facts.py (MODEL_CLASSES)", stage="model load")
    if s.device not in facts.DEVICES:
        c.add("EMBEDDED_DEVICE", "error", f"The embedded engine runs on {', '.join(facts.DEVICES)}, not {s.device}.",
              fix="use --device cpu, cuda or xpu", source="core/engine/device.py", stage="start-up")
    if s.tp != 1 or s.pp != 1:
        c.add("EMBEDDED_PARALLEL", "error",
              f"The embedded engine runs on one device: no tensor or pipeline parallelism (asked: tp {s.tp}, pp {s.pp}).",
              fix="use --tp 1 --pp 1, or SGLang for multi-device serving", source=SOURCE)
    if s.attention_backend:
        c.add("EMBEDDED_BACKEND_IGNORED", "warning",
              f"--attention-backend {s.attention_backend} means nothing to the embedded engine: it picks its kernels per "
              "device (set BRINGUP_KERNELS=reference to force the plain-torch ones).",
              fix="drop --attention-backend", source="kernels/dispatch.py")
    if s.mamba_strategy != "auto" or s.disable_radix_cache:
        c.add("EMBEDDED_NO_PREFIX_CACHE", "info",
              "The embedded engine has no prefix (radix) cache, so mamba cache strategies and --disable-radix-cache do "
              "not apply: each request holds one state slot.", source="core/engine/scheduler.py")
    _check_weight_schemes(c, m, s)
    resolve_dtypes(c, conv_default=None)
    if m.is_hybrid:
        r.mamba_conv_dtype = r.dtype
        r.why["mamba_conv_dtype"] = "the model dtype"
        r.mamba_ssm_dtype = s.mamba_ssm_dtype or facts.DEFAULT_SSM_DTYPE
        r.why["mamba_ssm_dtype"] = "--mamba-ssm-dtype" if s.mamba_ssm_dtype else f"the engine's default {facts.DEFAULT_SSM_DTYPE}"
    if s.kv_dtype.startswith("fp8"):
        c.add("EMBEDDED_KV_DTYPE", "error", f"The embedded engine has no {s.kv_dtype} KV cache: its pools hold plain "
              "torch dtypes (float32, bfloat16, float16).", fix="use --kv-dtype bfloat16 or drop it",
              engine_message="ValueError: " + facts.unknown_dtype_message(s.kv_dtype),
              source="core/engine/pools.py (as_dtype)", stage="start-up")
    r.kv_dtype = r.dtype if s.kv_dtype == "auto" else s.kv_dtype
    if s.kv_dtype == "auto":
        r.why["kv_dtype"] = "the model dtype"
    return c


def _check_weight_schemes(c: Check, m: ModelFacts, s: LaunchSettings) -> None:
    """A quantized checkpoint: which schemes run as stored (core/engine/quantized.py), which the
    engine refuses at load unless an explicit --dtype dequantises them."""
    if not m.weight_schemes or m.quant_method == "gguf":  # GGUF: kept where the layers take blocks, else dequantised
        return
    refused = [(k, label) for k, label in m.weight_schemes if k not in facts.RUNNABLE_WEIGHT_SCHEMES]
    if s.dtype != "auto":
        c.add("EMBEDDED_WEIGHTS_DEQUANTISED", "info",
              f"--dtype {s.dtype} dequantises the {m.quant_method} weights ({', '.join(l for _, l in m.weight_schemes)}) "
              "at load: they take the memory of that dtype.", fix="--dtype auto to run them as stored, where the engine can",
              source="core/engine/quantized.py (dequantised_weights)", stage="model load")
        return
    if not refused and m.model_type in facts.QUANTIZED_MODEL_TYPES:
        c.add("EMBEDDED_WEIGHTS_QUANTIZED", "info",
              f"The {m.quant_method} weights run as stored: {', '.join(l for _, l in m.weight_schemes)} "
              "(Triton W8A16 kernels on GPUs, the dequantising reference on the CPU).",
              source="core/engine/quantized.py, kernels/triton/fp8_linear.py", stage="model load")
        return
    key, label = refused[0] if refused else m.weight_schemes[0]
    message = facts.refused_scheme_message(label, key, m.quant_method, "the first such layer",
                                           model_type=None if refused else m.model_type)
    c.add("EMBEDDED_WEIGHT_SCHEME", "error",
          f"The embedded engine cannot run this checkpoint's {label} weights as stored.",
          fix="--dtype bfloat16 (dequantise at load), or serve with SGLang / vLLM", engine_message="UserError: " + message,
          source="core/engine/facts.py (RUNNABLE_WEIGHT_SCHEMES, QUANTIZED_MODEL_TYPES)", stage="model load")
