# sglang snippet: python/sglang/srt/mem_cache/kv_cache_configurator.py from line 2275
                    f"max_total_tokens={user_limit} is larger than the profiled value "
