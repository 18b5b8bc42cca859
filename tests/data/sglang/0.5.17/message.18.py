# sglang snippet: python/sglang/srt/server_args.py from line 5596
                "extra_buffer_lazy unsupported under PD disaggregation; use "
