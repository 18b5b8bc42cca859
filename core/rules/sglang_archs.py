"""SGLang's architecture lists, as read in `arg_groups/overrides.py` and `configs/hybrid_arch.py`
(sglang-notes §1.2-§1.3). Names are `architectures[0]` of the config; a trailing `*` in the notes
("NemotronH*", "Qwen3_5*") is a prefix here."""

from __future__ import annotations

from bringup.core.rules.model_facts import ModelFacts

# _MAMBA_RADIX_CACHE_ARCHS
_RADIX_EXACT = frozenset({"FalconH1ForCausalLM", "Lfm2ForCausalLM", "Lfm2MoeForCausalLM", "Qwen3NextForCausalLM",
                          "KimiLinearForCausalLM"})
_RADIX_PREFIX = ("NemotronH", "Zaya", "Qwen3_5", "KimiK3", "JetNemotron", "JetVLM", "Bailing", "MiniCPMV4_6",
                 "MiniCPMV4_7", "Glm5Next", "InternS2")
# _MAMBA_EXTRA_BUFFER_ARCHS = radix set minus these, plus Granite and Inkling.
_EXTRA_BUFFER_EXCLUDED = ("Lfm2ForCausalLM", "Lfm2MoeForCausalLM", "Zaya", "JetNemotron", "JetVLM", "InternS2Mobius")
_EXTRA_BUFFER_ADDED = ("GraniteMoeHybrid", "Inkling")
# Not implemented in SGLang 0.5.23 (no model or config file).
NOT_IMPLEMENTED = ("Jamba", "Bamba", "Zamba")
# model_hook: "{arch} does not support triton attention backend, as the first layer might not be an attention layer"
SHORT_CONV = ("Lfm2", "Zaya")


def _starts(arch: str, prefixes) -> bool:
    return any(arch.startswith(p) for p in prefixes)


def uses_mamba_radix_cache(m: ModelFacts) -> bool:
    arch = m.architecture
    if arch.startswith("GraniteMoeHybrid"):
        return m.is_hybrid  # only when some layer is mamba
    return arch in _RADIX_EXACT or _starts(arch, _RADIX_PREFIX)


def extra_buffer_arch(m: ModelFacts) -> bool:
    arch = m.architecture
    if _starts(arch, _EXTRA_BUFFER_ADDED):
        return arch.startswith("Inkling") or m.is_hybrid
    return uses_mamba_radix_cache(m) and not _starts(arch, _EXTRA_BUFFER_EXCLUDED)


def not_implemented(m: ModelFacts) -> bool:
    return _starts(m.architecture, NOT_IMPLEMENTED)


def hybrid_kv_pool(m: ModelFacts) -> bool:
    """SGLang builds a HybridLinearKVPool (KV only for full-attention layers): mambaish_config is set."""
    return uses_mamba_radix_cache(m) or (_starts(m.architecture, _EXTRA_BUFFER_ADDED) and m.is_hybrid)


def short_conv(m: ModelFacts) -> bool:
    return _starts(m.architecture, SHORT_CONV)
