# sglang snippet: python/sglang/srt/arg_groups/overrides.py from line 1862
        ), f"For SSM models, either chunk_size or page_size must be divisible by the other, got {chunk_size=}, {page_size=}"
