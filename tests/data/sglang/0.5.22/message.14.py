# sglang snippet: python/sglang/srt/layers/attention/attention_registry.py from line 470
                    f"Only {allowed} backends are supported on Blackwell GPUs for hybrid GDN models. "
