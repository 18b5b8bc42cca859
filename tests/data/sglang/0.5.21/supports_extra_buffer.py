# sglang snippet: python/sglang/srt/arg_groups/overrides.py from line 412
def supports_mamba_cache_extra_buffer(view: Any, hf_config: Any) -> bool:
    """Whether the model of ``hf_config`` supports the extra_buffer strategy on
    the configured linear-attention backend (pure read)."""
    from sglang.srt.configs.linear_attn_model_registry import get_linear_attn_spec

    if get_platform().is_xpu:
        return False
    spec = get_linear_attn_spec(hf_config)
    if hf_config.architectures[0] in _MAMBA_EXTRA_BUFFER_ARCHS or (
        spec is not None and spec.support_mamba_cache_extra_buffer
    ):
        return view.linear_attn_backend == "triton"
    return False
