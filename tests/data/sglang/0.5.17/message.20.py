# sglang snippet: python/sglang/srt/mem_cache/kv_cache_configurator.py from line 1741
                    "max_running_requests is capped to %d by the mamba state "
