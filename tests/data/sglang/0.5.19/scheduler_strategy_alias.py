# sglang snippet: python/sglang/srt/server_args.py from line 3918
        )
        parser.add_argument(
            "--mamba-scheduler-strategy",
            dest="mamba_radix_cache_strategy",
            type=str,
