# sglang snippet: python/sglang/srt/layers/attention/attention_registry.py from line 391
        initialize_linear_attn_config(
            runner.server_args, prefill_default=prefill_default
        )
        hybrid_backend_cls = HybridLinearAttnBackend
        if hybrid_gdn_config(runner.model_config) is not None:
            if is_blackwell():
                if is_sm120_supported():
                    allowed = {"triton", "trtllm_mha", "flashinfer"}
                else:
                    allowed = {"triton", "trtllm_mha", "fa4"}
                attn_be = runner.server_args.attention_backend
                prefill_be = runner.server_args.prefill_attention_backend
                decode_be = runner.server_args.decode_attention_backend
                # When using split prefill/decode backends, check each individually
                if prefill_be and decode_be:
                    assert prefill_be in allowed and decode_be in allowed, (
                        f"Only {allowed} backends are supported on Blackwell GPUs for hybrid GDN models. "
                        f"Got prefill={prefill_be}, decode={decode_be}."
                    )
                else:
                    assert attn_be in allowed, (
                        f"Only {allowed} backends are supported on Blackwell GPUs for hybrid GDN models. "
                        f"Got attention_backend={attn_be}."
                    )
