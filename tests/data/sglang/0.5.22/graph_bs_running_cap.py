# sglang snippet: python/sglang/srt/arg_groups/memory_hook.py from line 184
        and cfg.max_running_requests is not None
        and decode_cuda_graph_config.max_bs is not None
        and decode_cuda_graph_config.max_bs > cfg.max_running_requests
    ):
        decode_cuda_graph_config.max_bs = cfg.max_running_requests
