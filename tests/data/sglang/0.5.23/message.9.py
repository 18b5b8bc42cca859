# sglang snippet: python/sglang/srt/mem_cache/kv_cache_configurator.py from line 3394
                f"Not enough GPU memory for hybrid (mamba/linear-attention) state cache. "
