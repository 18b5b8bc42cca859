# sglang snippet: python/sglang/srt/arg_groups/platform_hook.py from line 127
                enable_fused_qk_norm_rope=True,
            )
        # Decode graph is opt-in on XPU: unless the user explicitly set
        # --cuda-graph-backend-decode (or --cuda-graph-config), keep it
        # disabled so the default startup doesn't require graph capture.
