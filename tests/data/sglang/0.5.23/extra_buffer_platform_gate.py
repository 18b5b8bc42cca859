# sglang snippet: python/sglang/srt/arg_groups/mamba_hook.py from line 102
def _platform_supports_mamba_cache_extra_buffer() -> bool:
    if current_platform.is_out_of_tree():
        return current_platform.support_mamba_cache_extra_buffer()
    platform = get_platform()
    return (
        platform.is_cuda
        or platform.is_musa
        or platform.is_npu
        or platform.is_hip
        or platform.is_xpu
    )
