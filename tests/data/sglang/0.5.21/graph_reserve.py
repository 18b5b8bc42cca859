# sglang snippet: python/sglang/srt/arg_groups/memory_hook.py from line 350
def reserve_for_graph_mb(server_args: Any) -> float:

    cfg = resolving_view(server_args)
    decode_cuda_graph_config = cfg.cuda_graph_config.decode
    prefill_cuda_graph_config = cfg.cuda_graph_config.prefill

    reserved_mem = 0.0
    if (
        cfg.disaggregation_mode != "prefill"
        and decode_cuda_graph_config.backend != Backend.DISABLED
    ):
        reserved_mem += decode_cuda_graph_config.max_bs * 2

    if (
        resolved_view(server_args).enable_dp_attention
        and cfg.disaggregation_mode != "prefill"
    ):
        # DP attention needs more padding for some operations, and much more for large
        # cuda graph max bs (torch allocator / implementation inefficiencies).
        reserved_mem += decode_cuda_graph_config.max_bs * cfg.dp_size * 3
        if decode_cuda_graph_config.max_bs > 300:
            reserved_mem += decode_cuda_graph_config.max_bs * cfg.dp_size * 1.5

    if (
        cfg.disaggregation_mode != "decode"
        and prefill_cuda_graph_config.backend != Backend.DISABLED
    ):
        if not use_mla_backend(server_args):
            # Only non-torch memory is counted; torch memory is reused by cuda graph capture.
            reserved_mem += len(prefill_cuda_graph_config.bs) * 8
        else:
            # MLA backend overhead is much higher than expected with fa3.
            reserved_mem += 1.5 * 1024

        if (
            prefill_cuda_graph_config.backend == Backend.BREAKABLE
            and resolved_view(server_args).moe_a2a_backend == "deepep"
        ):
            # Prefill-BCG DeepEP delta (bridge pool + NVL first-touch
            # during capture); decode-side DeepEP is a baseline cost.
            reserved_mem += 1 * 1024

    return reserved_mem
