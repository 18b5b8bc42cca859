# sglang snippet: python/sglang/srt/layers/attention/attention_registry.py from line 434
                        "are not yet supported on NPU: the conv-state sidecar "
