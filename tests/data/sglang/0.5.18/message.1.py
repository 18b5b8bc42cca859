# sglang snippet: python/sglang/srt/layers/attention/attention_registry.py from line 476
                    "Expected hybrid GDN or NemotronH models, but got unknown model. "
