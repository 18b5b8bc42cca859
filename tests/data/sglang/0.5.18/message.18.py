# sglang snippet: python/sglang/srt/server_args.py from line 5815
                "extra_buffer_lazy unsupported under PD disaggregation; use "
