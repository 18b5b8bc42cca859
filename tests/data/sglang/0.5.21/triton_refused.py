# sglang snippet: python/sglang/srt/arg_groups/model_hook.py from line 671
    elif model_arch in ["Lfm2ForCausalLM", "Lfm2MoeForCausalLM"]:
        # Attention backend selection moved to the override registry
        # (arg_groups/overrides.py: _lfm2_overrides).
        assert resolved_view(server_args).attention_backend != "triton", (
            f"{model_arch} does not support triton attention backend, "
            "as the first layer might not be an attention layer"
        )
