# sglang snippet: python/sglang/srt/arg_groups/overrides.py from line 1280
            "The current platform does not support Intel XMX, will fallback to triton backend."
