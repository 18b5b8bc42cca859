"""`plan_memory`: one entry point for every target; the embedded engine calls it to size its pools."""

from __future__ import annotations

from pathlib import Path

from bringup.core.errors import UserError
from bringup.core.layermap.vocabulary import LayerMap

from bringup.core.layermap.dtypes import canonical_dtype, dtype_bytes, model_dtype
from .memory_plan import MemoryPlan
from .weights import checkpoint_weights


def parse_target(target: str):
    """'embedded' -> ('embedded', None); 'sglang==0.5.23' -> ('sglang', Version('0.5.23')); 'sglang' alone:
    the newest rule profile's release; 'vllm==0.33.0' -> ('vllm', Version('0.33.0')), 'vllm' alone: the
    release read. The grammar is the rules' (core/rules/targets.py), for every command."""
    from bringup.core.rules.profiles import NEWEST
    from bringup.core.rules.targets import read_target

    engine, _, version = read_target(target or "embedded")
    if engine == "sglang" and version is None:
        version = NEWEST.release
    if engine == "vllm" and version is None:
        from bringup.core.rules.vllm_facts import READ_VERSION

        version = READ_VERSION
    return engine, version


def _resolve_weights(layer_map: LayerMap, weights_bytes, checkpoint, elem_bytes: int,
                     as_stored: bool = False, engine_device: str | None = None) -> tuple[int, str, list[str]]:
    """`as_stored`: the dtype was left to the checkpoint, so quantized weights count at their own bits,
    except a GGUF file's where `engine_device` (the embedded engine's device) dequantises them at load."""
    if weights_bytes is not None:
        if weights_bytes < 0:
            raise UserError(f"weights_bytes must be >= 0, got {weights_bytes}")
        return int(weights_bytes), "given", []
    notes = []
    try:
        ckpt = checkpoint_weights(checkpoint) if checkpoint else None
    except UserError as err:  # a partial download or a damaged file: plan from the parameter count
        ckpt = None
        notes.append(f"checkpoint not used for the weights ({err})")
    if ckpt is not None:
        return ckpt.bytes_as(elem_bytes), "checkpoint", [f"weights from {len(ckpt.files)} safetensors file(s), "
                                                         f"{ckpt.params:,} parameters"]
    if layer_map.params_total <= 0:
        raise UserError(f"the layer map of {layer_map.name or 'this model'} has no parameter count; pass the weight size")
    if as_stored:
        from bringup.core.layermap.layer_schemes import weights_bytes as quantized_bytes
        from bringup.core.layermap.quantization import read_quantization

        try:
            quant = read_quantization(layer_map.config)
        except UserError as err:  # an unreadable table: the map carries the same note; plan in the model dtype
            quant = None
            notes.append(f"weights counted in the model dtype: {err}")
        refused = ""
        if quant is not None and quant.method == "gguf" and engine_device not in (None, "auto"):
            from bringup.core.engine.facts import gguf_blocks_refused

            refused = gguf_blocks_refused(layer_map.config.get("model_type"), engine_device)
        if refused:
            notes.append(f"weights in the model dtype, as the engine dequantises the GGUF blocks at load: {refused}")
        elif quant is not None:
            notes.append(f"weights at the checkpoint's {quant.method} scheme ({quant.default.label})")
            return quantized_bytes(layer_map, quant), "params", notes
    return layer_map.params_total * elem_bytes, "params", notes


def plan_memory(
    layer_map: LayerMap,
    *,
    device_memory: int,
    target: str = "embedded",
    device: str = "cpu",
    mem_fraction: float | None = None,
    tp: int = 1,
    pp: int = 1,
    dtype: str | None = "bfloat16",
    kv_dtype: str | None = None,
    conv_dtype: str | None = None,
    ssm_dtype: str | None = "float32",
    page_size: int | None = None,
    context: int | None = None,
    max_running_requests: int | None = None,
    weights_bytes: int | None = None,
    checkpoint: str | Path | None = None,
    **sglang_options,
) -> MemoryPlan:
    """Predict (or, for the embedded engine, decide) weights, KV pool and state pool on one device.

    dtype None or "auto" takes the checkpoint's dtype. kv_dtype defaults to dtype. conv_dtype
    defaults to bfloat16 for SGLang (SGLANG_MAMBA_CONV_DTYPE's default) and to dtype for the
    embedded engine. ssm_dtype None resolves as the target does (SGLang: config `mamba_ssm_dtype`,
    else float32). Weights: `weights_bytes` (whole model) if given, else the safetensors headers of
    `checkpoint` (a local folder), else the layer map's parameter count times the dtype width.
    SGLang-only options (`mamba_strategy`, `disable_radix_cache`, `mamba_full_memory_ratio`, ...)
    are passed through to `plan_sglang`.
    """
    kind, version = parse_target(target)
    if kind == "vllm" and conv_dtype not in (None, "auto"):
        raise UserError("vLLM keeps the conv state in the model's dtype (it has no conv dtype option); leave --conv-dtype out")
    asked_ssm = None if ssm_dtype in (None, "auto") else canonical_dtype(ssm_dtype, what="SSM state dtype")
    device = (device or "cpu").strip().lower()
    if isinstance(device_memory, bool) or not isinstance(device_memory, (int, float)) or device_memory <= 0:
        raise UserError(f"device memory must be a positive number of bytes, got {device_memory!r}")
    device_memory = int(device_memory)
    for name, value in (("tp", tp), ("pp", pp)):
        if not isinstance(value, int) or value < 1:
            raise UserError(f"--{name} must be a positive integer, got {value!r}")
    if mem_fraction is not None and not 0 < mem_fraction <= 1:
        raise UserError(f"--mem-fraction must be in (0, 1], got {mem_fraction}")
    if page_size is not None and page_size < 1:
        raise UserError(f"--page-size must be at least 1, got {page_size}")
    if context is not None and context < 1:
        raise UserError(f"--context must be at least 1 token, got {context}")
    if max_running_requests is not None and max_running_requests < 1:
        raise UserError(f"--max-running-requests must be at least 1, got {max_running_requests}")

    as_stored = dtype in (None, "auto")
    dtype = model_dtype(layer_map.config) if as_stored else canonical_dtype(dtype)
    kv_dtype = dtype if kv_dtype in (None, "auto") else canonical_dtype(kv_dtype, what="KV cache dtype")
    if conv_dtype in (None, "auto"):
        conv_dtype = "bfloat16" if kind == "sglang" else dtype
    conv_dtype = canonical_dtype(conv_dtype, what="conv state dtype")
    if ssm_dtype in (None, "auto"):
        cfg = layer_map.config
        declared = cfg.get("mamba_ssm_dtype") or (cfg.get("text_config") or {}).get("mamba_ssm_dtype")
        ssm_dtype = declared if kind == "sglang" and declared else "float32"
    ssm_dtype = canonical_dtype(ssm_dtype, what="SSM state dtype")
    weights, source, weight_notes = _resolve_weights(layer_map, weights_bytes, checkpoint, dtype_bytes(dtype),
                                                      as_stored, device if kind == "embedded" else None)

    common = dict(
        device=device, device_memory=device_memory, mem_fraction=mem_fraction, weights_bytes=weights,
        weights_source=source, dtype=dtype, kv_dtype=kv_dtype, conv_dtype=conv_dtype, ssm_dtype=ssm_dtype,
        dtype_bytes=dtype_bytes, page_size=page_size, context=context, max_running_requests=max_running_requests,
    )
    sliding = layer_map.sliding_attention_layers
    if kind != "embedded" and sglang_options.get("mixed_prefill_size") is not None:
        raise UserError("--mixed-prefill-size is the embedded engine's (prompt tokens in a step with decodes); "
                        "leave it out for SGLang and vLLM targets")
    if kind == "embedded":
        if tp != 1 or pp != 1:
            raise UserError("the embedded engine runs on one device; use --tp 1 --pp 1, or plan for --target sglang==X.Y.Z")
        chunk = sglang_options.pop("chunked_prefill_size", None)  # the one such option the engine has
        mixed = sglang_options.pop("mixed_prefill_size", None)  # the engine's own
        if sglang_options:
            raise UserError(f"options {', '.join(sorted(sglang_options))} apply to SGLang targets only")
        for flag, value in (("--chunked-prefill-size", chunk), ("--mixed-prefill-size", mixed)):
            if value is not None and value < 1:
                raise UserError(f"{flag} must be at least 1, got {value}")
        from .embedded import plan_embedded

        plan = plan_embedded(layer_map, **common, chunked_prefill_size=chunk, mixed_prefill_size=mixed)
    elif kind == "vllm":
        from .vllm import plan_vllm

        common["ssm_dtype"] = asked_ssm  # None: as vLLM resolves it (the model's dtype; NemotronH float32)
        others = sorted(set(sglang_options) - {"disable_radix_cache", "mamba_strategy"})
        if others:
            raise UserError(f"options {', '.join(others)} apply to SGLang targets only (vLLM: --disable-radix-cache "
                            "turns prefix caching off, --max-running-requests is its --max-num-seqs)")
        plan = plan_vllm(layer_map, version=version, tp=tp, pp=pp, **common, **sglang_options)
    else:
        from .sglang import plan_sglang

        plan = plan_sglang(layer_map, version=version, tp=tp, pp=pp, **common, **sglang_options)
    plan.notes[:0] = weight_notes
    shared = layer_map.kv_shared_layers
    if shared:
        plan.notes.append(
            f"{len(shared)} layers reuse an earlier layer's KV cache (KV sharing) and add no KV bytes")
    if sliding and not plan.swa_window:
        plan.notes.append(
            f"{len(sliding)} sliding-window layers are counted as full KV layers; an engine with a separate "
            "sliding-window pool (SGLang's SWA pool) holds more tokens than shown")
    return plan
