# sglang snippet: python/sglang/srt/arg_groups/memory_hook.py from line 283
    if cfg.mem_fraction_static is None:
        model_config = model_config_of(server_args)
        is_vlm = (
            model_config.is_multimodal
            and not cfg.language_only
            and not cfg.language_model_only
            and cfg.disaggregation_mode != "decode"
        )
        post_capture_kv_sizing = post_capture_kv_sizing_planned(server_args)

        if post_capture_kv_sizing:
            # Post-capture sizing measures free memory after graph capture, so
            # skip the graph/activation reserve; keep only the floor + parallel slack.
            reserved_mem = 1536
            reserved_mem += cfg.tp_size * cfg.pp_size / 8 * 1024
        else:
            # Tokens the activation working set scales with (per serving mode).
            if cfg.disaggregation_mode == "decode":
                running_requests = (
                    cfg.max_running_requests or decode_cuda_graph_config.max_bs or 1
                )
                draft_tokens = cfg.speculative_num_draft_tokens or 1
                activation_tokens = max(running_requests * draft_tokens, 2048)
            elif cfg.chunked_prefill_size > 0:
                activation_tokens = max(cfg.chunked_prefill_size, 2048)
            else:
                activation_tokens = max(cfg.max_prefill_tokens, 2048)
            # Constant meta data (e.g., from attention backend) + activation slack.
            reserved_mem = 512
            reserved_mem += activation_tokens * 1.5
            # Some adjustments for large parallel size
            reserved_mem += cfg.tp_size * cfg.pp_size / 8 * 1024
            reserved_mem += reserve_for_graph_mb(server_args)
            if gpu_mem is not None and gpu_mem > 60 * 1024:
                reserved_mem = max(reserved_mem, 10 * 1024)
            # Reserve headroom for DeepEP all-to-all buffers on top of the floor.
            reserved_mem += reserve_for_deepep_a2a_mb(server_args)
            # XPU: oneDNN allocates scratch space for matmul when
            # M is not a power-of-2-aligned value (e.g. M=2100).  Reserve extra
            # headroom so non-aligned prefill lengths don't hit OOM.
            if get_platform().is_xpu:
                reserved_mem += 2 * 1024

        mem_fraction_static = (
            round((gpu_mem - reserved_mem) / gpu_mem, 3)
            if gpu_mem is not None
            else 0.95
        )

        # Multimodal models need more memory for the image processing.
        if is_vlm:
            mem_fraction_static = adjust_mem_fraction_for_vlm(
                mem_fraction_static,
                model_config,
                post_capture_kv_sizing,
                gpu_mem,
            )

        declare_resolution(
            server_args,
            "_handle_gpu_memory_settings",
            mem_fraction_static=mem_fraction_static,
        )
