# sglang snippet: python/sglang/srt/mem_cache/kv_cache_configurator.py from line 1680
                ), "Lazy extra buffer requires overlap schedule (--disable-overlap-schedule is incompatible)"
