# sglang snippet: python/sglang/srt/layers/attention/attention_registry.py from line 458
            prefill_default=prefill_default
        )
        hybrid_backend_cls = HybridLinearAttnBackend
        if hybrid_gdn_config(runner.model_config) is not None:
            if is_blackwell():
                if get_platform().is_sm120:
                    allowed = {"triton", "trtllm_mha", "flashinfer"}
                else:
                    # FlashInfer paged prefill is also valid for SM100 hybrid
                    # GDN models. In particular, quantized KV recipes use it
                    # to expose an FP8 dequant workspace while a different
                    # backend (for example TRT-LLM GenMHA) owns decode.
                    allowed = HYBRID_GDN_SM100_BACKENDS
                prefill_be = runner.prefill_attention_backend_str
                decode_be = runner.decode_attention_backend_str
                assert prefill_be in allowed and decode_be in allowed, (
                    f"Only {allowed} backends are supported on Blackwell GPUs for hybrid GDN models. "
                    f"Got prefill={prefill_be}, decode={decode_be}."
                )
            elif is_npu():
                assert (
                    runner.prefill_attention_backend_str == "ascend"
                    and runner.decode_attention_backend_str == "ascend"
                ), (
