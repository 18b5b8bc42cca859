# sglang snippet: python/sglang/srt/mem_cache/kv_cache_configurator.py from line 3051
                f"Loaded weights leave no GPU memory for the KV cache under "
