"""Where the oracle and `bringup validate` disagree for a reason that is not a wrong rule: the check lies
beyond the oracle's reach (the engine's model runner, memory pools or attention backend init), or the
oracle's environment differs from a real one. Each limit says why; the suite fails a listed cell that
has come to agree (so this list cannot rot) and any unlisted disagreement.

Disagreements that were wrong rules were fixed in core/rules instead (the closing note of issue 31 lists them).
"""

from __future__ import annotations

# Releases whose environment could not be built here, with why (none: every supported release ran).
RELEASES_NOT_RUN: dict[str, str] = {}

# vLLM's limits are in vllm_limits.py (its own cells and table).


def explain(version: str, key, engine: dict, pred: dict, diffs=()) -> str | None:
    """Why this cell's disagreement is a limit, or None when it must agree."""
    for device, text in OPEN:
        if (not device or key.device == device) and any(text in d for d in diffs):
            return f"open (not yet triaged): {text}"
    for rule in RULES:
        why = rule(version, key, engine, pred)
        if why:
            return why
    return None


def _falcon_h1_config(version, key, engine, pred):
    if "mamba_n_heads must divide" in (engine.get("error") or ""):
        return ("the release's pinned transformers refuses this Falcon-H1 config when SGLang loads it "
                "(FalconH1Config validate_architecture: mamba_n_heads must divide mamba_expand * hidden_size): a "
                "model-load failure of the config itself, which the rules do not model; seen in every release")
    return None


def _remote_code(version, key, engine, pred):
    if "trust_remote_code=True" in (engine.get("error") or ""):
        return ("MiniMax-M1's config is custom code: SGLang needs --trust-remote-code, which neither the rules "
                "nor the launch builder know yet (a follow-up)")
    return None


def _cpu_without_amx(version, key, engine, pred):
    if key.device == "cpu" and engine.get("accepted") and engine.get("attention_backend") == "torch_native" \
            and pred.get("attention_backend") == "intel_amx":
        return ("the oracle's CPU is this host, which has no AMX: SGLang falls back to torch_native "
                "(arg_groups/overrides.py:2222 in 0.5.17, _attention_backend_platform_fallbacks); the rules "
                "assume an AMX Xeon")
    return None


def _oracle_env(version, key, engine, pred):
    """The stand-ins fall short: an import a stub cannot satisfy (the error names the stub's package)."""
    err = engine.get("error") or ""
    if not engine.get("accepted") and (err.startswith("import:") or "No module named" in err or "from 'torch_npu'" in err
                                        or "oraclestub" in err or "gpu stub" in err):
        return f"oracle environment: {err[:120]}"
    return None


def _quantization_on_device(version, key, engine, pred):
    if "Unknown quantization method" in (engine.get("error") or ""):
        return ("the checkpoint's quantization (mxfp4, gpt-oss) is not registered on this device's build; the "
                "rules check no quantization method")
    return None


def _intel_xpu_mla(version, key, engine, pred):
    if "intel_xpu backend is only supported on decode for MLA models" in (engine.get("error") or ""):
        return ("intel_xpu on an MLA model (Kimi-Linear) must be given as --decode-attention-backend only; "
                "the rules and the launch builder have no split prefill/decode backends yet (a follow-up)")
    return None


# Disagreements found by the matrix and not yet triaged: (device or "", text found in a disagreement). The suite
# keeps them from growing and fails once one agrees. The five groups left by issue 31's first session (115 cells)
# were all wrong rules, fixed in core/rules/sglang_backends.py and sglang_mamba.py (issue 31, 2026-12-03).
OPEN: tuple[tuple[str, str], ...] = ()


RULES = (_falcon_h1_config, _remote_code, _cpu_without_amx, _oracle_env, _quantization_on_device, _intel_xpu_mla)
