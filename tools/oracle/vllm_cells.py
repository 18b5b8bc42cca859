"""vLLM's differential matrix: its cells, and how one cell's oracle record (probe_vllm.py) is set against
`bringup validate --engine vllm`. Imported by the matrix runner (tools/oracle/matrix.py vllm ...) and by
the suite (tests/tools/test_oracle_vllm_table.py), so the committed table is judged by the rule that made it.

The settings are those core/launch/vllm.py can put on a `vllm serve` line: --attention-backend,
--block-size, TP, PP, --no-enable-prefix-caching, --dtype, --kv-cache-dtype, --mamba-ssm-cache-dtype; and
the extra "run" is the line as the Run tab starts it, with --host and --port (cells.launch_argv).
Pruning (what the matrix leaves out, and why):
- every model on every device with the default settings and with prefix caching off (the two
  mamba_cache_modes, align and none, which decide the alignment: platforms/interface.py:1088-1092);
- the attention backends each device can run, for one hybrid of each kind of state (FULL) and one model
  without state: the block size follows the backend's kernel block sizes (interface.py:1068-1083);
- the other settings on the default backend only, on cuda-hopper and xpu (the two targets the project
  serves first; the TP/PP/dtype rules do not depend on the backend in the rules read).
"""

from __future__ import annotations

from dataclasses import dataclass

from cells import DEVICES, RUN_ENDPOINT, JoinedKey, parsed_disagreements, target_settings  # shared with SGLang's cells

# --attention-backend values per device (vLLM's AttentionBackendEnum names the validator takes).
BACKENDS = {
    "cuda": ("FLASH_ATTN", "TRITON_ATTN", "FLASHINFER"), "rocm": ("ROCM_ATTN", "TRITON_ATTN"),
    "xpu": ("FLASH_ATTN", "TRITON_ATTN", "TRITON_FLASH_ATTN", "FLASHINFER"), "npu": (), "cpu": (),
}
MLA_BACKENDS = {"cuda": ("TRITON_MLA", "FLASHMLA"), "rocm": ("TRITON_MLA",), "xpu": ("TRITON_MLA",)}
EXTRAS = {  # name -> LaunchSettings changes (default backend)
    "no_prefix": {"disable_radix_cache": True}, "block16": {"page_size": 16}, "block64": {"page_size": 64},
    "tp2": {"tp": 2}, "tp4": {"tp": 4}, "pp2": {"pp": 2}, "fp16": {"dtype": "float16"},
    "fp32": {"dtype": "float32"}, "kv_fp8": {"kv_dtype": "fp8_e4m3"}, "ssm_bf16": {"mamba_ssm_dtype": "bfloat16"},
    "ssm_f32": {"mamba_ssm_dtype": "float32"}, "run": {},
}
# What the release's parser must have read from the flags only the Run tab writes (cli/serve.py's namespace).
PARSED = {"run": {"host": RUN_ENDPOINT[0], "port": RUN_ENDPOINT[1]}}
EVERY_DEVICE = ("", "no_prefix")
EXTRA_DEVICES = ("cuda-hopper", "xpu")
STATE_ONLY = ("ssm_bf16", "ssm_f32")  # Mamba settings: only on models with state
FULL = ("nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B", "Qwen__Qwen3-Next-80B-A3B-Instruct", "LiquidAI__LFM2-2.6B",
        "tiiuae__Falcon-H1-0.5B", "ai21labs__AI21-Jamba-1.5-Mini", "moonshotai__Kimi-Linear-48B-A3B-Instruct",
        "Qwen__Qwen3-8B")
# The validator's stages the oracle reaches: argument parsing and the engine config (stage "arguments"),
# and the errors of checks that run there or in the selector/alignment the probe runs (by code).
REACHABLE_STAGES = (None, "", "arguments")
REACHABLE_CODES = ("VLLM_DEVICE", "VLLM_XPU_ATTENTION_BACKEND", "VLLM_NO_HYBRID_KV_CACHE", "VLLM_ARCH_REMOVED",
                   "VLLM_NO_ATTENTION_BACKEND", "VLLM_ATTENTION_BACKEND_INVALID",
                   # the quantization checks run in ModelConfig / VllmConfig (config/vllm.py:928-943)
                   "VLLM_QUANT_PLATFORM", "VLLM_QUANT_DTYPE", "VLLM_QUANT_GGUF")


@dataclass(frozen=True)
class CellKey(JoinedKey):
    model: str  # file name under ../shared/models, without .json
    device: str  # an oracle target (DEVICES)
    backend: str  # "default" or an --attention-backend
    extra: str = ""  # "" or a key of EXTRAS


def settings_for(key: CellKey):
    from bringup.core.rules.settings import LaunchSettings

    kw = target_settings(key.device, key.backend)
    kw.update(EXTRAS.get(key.extra, {}))
    return LaunchSettings(**kw)


def keys_for(models: dict[str, tuple[bool, bool]]) -> list[CellKey]:
    """models: name -> (whether it keeps recurrent state, whether its attention is MLA)."""
    out = []
    for model, (hybrid, mla) in models.items():
        for device, (kind, _gpu, _xmx) in DEVICES.items():
            out += [CellKey(model, device, "default", extra) for extra in EVERY_DEVICE]
            if model in FULL:
                out += [CellKey(model, device, b, "") for b in (MLA_BACKENDS.get(kind, ()) if mla else BACKENDS[kind])]
            if device in EXTRA_DEVICES:
                out += [CellKey(model, device, "default", extra) for extra in EXTRAS
                        if extra not in EVERY_DEVICE and (hybrid or extra not in STATE_ONLY)]
    return out


def predicted(result, memory_mib: int | None, key: CellKey | None = None) -> dict:
    """What the validator says about one cell, in the table's terms (with `key`: what the flags only its
    extra writes must parse to)."""
    from bringup.core.planner.vllm import default_max_num_seqs

    r = result.resolved
    first = result.first_error
    reach = next((f for f in result.findings if f.is_error and (f.stage in REACHABLE_STAGES or f.code in REACHABLE_CODES)),
                 None)
    return {"verdict": result.verdict, "first_error": first.code if first else None,
            "first_error_stage": first.stage if first else None,
            "reachable_error": reach.code if reach else None,
            "reachable_message": (reach.engine_message or reach.message) if reach else None,
            "attention_backend": r.attention_backend, "page_size": r.page_size, "mamba_strategy": r.mamba_strategy,
            "radix_cache": r.radix_cache,
            "max_num_seqs": default_max_num_seqs(memory_mib << 20) if memory_mib else None,
            "parsed": PARSED.get(key.extra) if key is not None else None}


def observed(oracle: dict) -> dict:
    """The oracle's record of one cell, in the table's terms."""
    if not oracle.get("accepted"):
        return {"accepted": False, "error": oracle.get("error"), "where": oracle.get("where"),
                "stage": oracle.get("stage")}
    a = oracle["resolved"]
    align = oracle.get("alignment") or {}
    parsed = {"parsed": oracle["parsed"]} if oracle.get("parsed") else {}
    return {**parsed, "accepted": True, "block_size": a.get("block_size"), "mamba_cache_mode": a.get("mamba_cache_mode"),
            "prefix_caching": a.get("enable_prefix_caching"), "attention_backends": align.get("attention_backends"),
            "gdn_prefill_backend": align.get("gdn_prefill_backend"), "alignment_limit": oracle.get("alignment_limit"),
            "mamba_page_size_padded": a.get("mamba_page_size_padded"), "mamba_ssm_cache_dtype": a.get("mamba_ssm_cache_dtype"),
            "dtype": a.get("dtype"), "cache_dtype": a.get("cache_dtype"), "max_num_seqs": a.get("max_num_seqs"),
            "max_num_batched_tokens": a.get("max_num_batched_tokens")}


def disagreements(pred: dict, seen: dict, hybrid: bool) -> list[str]:
    """What the two say differently about one cell; [] when they agree."""
    if not seen["accepted"]:
        if pred["reachable_error"] is None:
            return [f"engine refused ({seen['error']!r} at {seen['where']}); validator has no error the oracle reaches"]
        text = (pred["reachable_message"] or "").split(": ", 1)[-1]
        if text and text.split("{")[0][:40] not in (seen["error"] or ""):
            return [f"both refuse, but the engine says {seen['error']!r}, validator {pred['reachable_message']!r}"]
        return []
    if pred["reachable_error"] is not None:
        return [f"engine accepted; validator stops on {pred['reachable_error']}"]
    out = parsed_disagreements(pred.get("parsed"), seen)
    if seen["alignment_limit"] is not None:
        out.append(f"page_size: not reached by the oracle (validator {pred['page_size']!r})")
    elif pred["page_size"] != seen["block_size"]:
        out.append(f"page_size: engine {seen['block_size']!r}, validator {pred['page_size']!r}")
    if pred["radix_cache"] != seen["prefix_caching"]:
        out.append(f"prefix caching: engine {seen['prefix_caching']!r}, validator {pred['radix_cache']!r}")
    if hybrid and pred["mamba_strategy"] != seen["mamba_cache_mode"]:
        out.append(f"mamba_cache_mode: engine {seen['mamba_cache_mode']!r}, validator {pred['mamba_strategy']!r}")
    backends = seen["attention_backends"] or []
    if pred["attention_backend"] and backends and pred["attention_backend"].upper() not in backends:
        out.append(f"attention backend: engine {backends!r}, validator {pred['attention_backend']!r}")
    if pred["max_num_seqs"] is not None and pred["max_num_seqs"] != seen["max_num_seqs"]:
        out.append(f"max_num_seqs: engine {seen['max_num_seqs']!r}, validator {pred['max_num_seqs']!r}")
    return out


def table_argv(argv: list[str]) -> str:
    """The launch arguments as the table keeps them: without the model folder (a temporary path, the first
    argument) and the oracle's own --skip-tokenizer-init."""
    return " ".join(a for a in argv[1:] if a != "--skip-tokenizer-init")
