# sglang snippet: python/sglang/srt/mem_cache/kv_cache_configurator.py from line 3154
                    f"Hybrid (mamba/linear-attention) state cache is too small to serve "
