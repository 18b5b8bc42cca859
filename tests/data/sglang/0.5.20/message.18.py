# sglang snippet: python/sglang/srt/arg_groups/mamba_hook.py from line 113
            "extra_buffer_lazy unsupported under PD disaggregation; use "
