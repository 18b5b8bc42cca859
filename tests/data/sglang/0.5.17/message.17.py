# sglang snippet: python/sglang/srt/server_args.py from line 5589
        ), f"extra_buffer is not supported for {model_arch}; use no_buffer."
