# sglang snippet: python/sglang/srt/arg_groups/validation_hook.py from line 162
            "chunked_prefill_size must be divisible by page_size"
