# sglang snippet: python/sglang/srt/mem_cache/memory_pool.py from line 1632
                "Not enough space for mamba ping pong idx, try to increase --mamba-full-memory-ratio."
