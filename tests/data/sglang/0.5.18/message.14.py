# sglang snippet: python/sglang/srt/server_args.py from line 9204
            ), "chunked_prefill_size must be divisible by page_size"
