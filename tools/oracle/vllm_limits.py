"""Where vLLM's oracle (probe_vllm.py) and `bringup validate --engine vllm` disagree for a reason that is
not a wrong rule: the check lies beyond the oracle's reach, the stand-ins fall short, or the config itself
is refused before any rule applies. Each limit says why; the suite (tests/tools/test_oracle_vllm_table.py)
fails a listed cell that has come to agree, and any unlisted disagreement.

Disagreements that were wrong rules were fixed in core/rules/vllm.py instead (issue 31's note lists them).
"""

from __future__ import annotations


def explain(key, engine: dict, pred: dict, diffs=()) -> str | None:
    """Why this cell's disagreement is a limit, or None when it must agree."""
    for rule in RULES:
        why = rule(key, engine, pred, diffs)
        if why:
            return why
    return None


def _falcon_h1_config(key, engine, pred, diffs):
    if "mamba_n_heads must divide" in (engine.get("error") or ""):
        return ("the release's transformers (5.20.2, in vLLM 0.33's range <5.21) refuses this Falcon-H1 config "
                "(FalconH1Config.validate_architecture: mamba_n_heads must divide mamba_expand * hidden_size; the "
                "shared config has no mamba_d_ssm): the config itself, which the rules do not judge; SGLang too")
    return None


def _remote_code(key, engine, pred, diffs):
    if "contains custom code" in (engine.get("error") or ""):
        return ("MiniMax-M1's config is custom code: vLLM needs --trust-remote-code before it reads the architecture "
                "(which it then refuses as removed after 0.23.0, the rule's VLLM_ARCH_REMOVED); neither the rules nor "
                "the launch builder pass --trust-remote-code yet")
    return None


def _npu(key, engine, pred, diffs):
    if key.device == "npu" and not engine.get("accepted") and pred.get("verdict") == "failure":
        return ("vLLM has no in-tree NPU platform (vllm-ascend is a plugin); both refuse, the oracle inside vLLM's "
                "own NPU-free resolution, where the stand-in torch_npu lacks the kernels vLLM imports "
                f"({(engine.get('error') or '')[:80]})")
    return None


def _state_layer_not_identified(key, engine, pred, diffs):
    limit = engine.get("alignment_limit")
    if limit and all(d.startswith("page_size") for d in diffs):
        return f"the block alignment was not reproduced: {limit} (vllm_layers.py); the page size is not compared"
    return None


def _rocm_aiter(key, engine, pred, diffs):
    if key.device == "rocm" and any(b.startswith("ROCM_AITER") for b in engine.get("attention_backends") or ()):
        return ("the oracle's aiter stub imports, so vLLM takes an AITER backend "
                f"({', '.join(engine['attention_backends'])}, for gpt-oss's sinks) whose block sizes the rules do not "
                "model; a ROCm install without AITER runs Triton instead")
    return None


def _cuda_only_import(key, engine, pred, diffs):
    if not engine.get("accepted") and "Torch not compiled with CUDA enabled" in (engine.get("error") or ""):
        return (f"oracle environment: the selected backend's module calls CUDA at import ({engine.get('where')}); "
                "the CPU build of torch cannot, so the cell stops there")
    return None


def _cpu_triton(key, engine, pred, diffs):
    if key.device == "cpu" and "requires Triton (triton-cpu)" in (engine.get("error") or ""):
        return ("oracle environment: from 0.34.0 vLLM's CPU platform stops on x86 without Triton "
                "(platforms/cpu.py:239-243, `HAS_TRITON`), and the oracle stands no Triton in on the CPU target "
                "(the GPU targets get gpu_stubs.triton_with_driver), so the cell is not reached past the "
                "platform check; whether a user's CPU install has triton-cpu is not known here")
    return None


RULES = (_cpu_triton, _falcon_h1_config, _remote_code, _npu, _state_layer_not_identified, _rocm_aiter, _cuda_only_import)
