# sglang snippet: python/sglang/srt/arg_groups/platform_hook.py from line 128
    cfg = resolving_view(server_args)
    if cfg.device == "xpu":
        # Decode graph is opt-in on XPU: unless the user explicitly set
        # --cuda-graph-backend-decode (or --cuda-graph-config), keep it
        # disabled so the default startup doesn't require graph capture.
