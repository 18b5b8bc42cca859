# sglang snippet: python/sglang/srt/server_args.py from line 8679
            ), f"For SSM models, either chunk_size or page_size must be divisible by the other, got {chunk_size=}, {page_size=}"
