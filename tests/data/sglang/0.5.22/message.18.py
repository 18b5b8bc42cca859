# sglang snippet: python/sglang/srt/arg_groups/mamba_hook.py from line 118
        f"extra_buffer is not supported for {hf_config.architectures[0]}; use no_buffer."
