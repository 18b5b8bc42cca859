# sglang snippet: python/sglang/srt/arg_groups/mamba_hook.py from line 101
        f"extra_buffer is not supported for {model_arch}; use no_buffer."
