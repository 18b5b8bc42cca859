# sglang snippet: python/sglang/srt/layers/attention/attention_registry.py from line 429
        prefill_default = None
        if hybrid_gdn_config(runner.model_config) is not None and not is_npu():
            prefill_default = flashinfer_gdn_prefill_default(runner)
        runner.linear_attn_backends = resolve_linear_attn_backends(
            prefill_default=prefill_default
        )
        hybrid_backend_cls = HybridLinearAttnBackend
        if hybrid_gdn_config(runner.model_config) is not None:
            if is_blackwell():
                if get_platform().is_sm120:
                    allowed = {"triton", "trtllm_mha", "flashinfer"}
                else:
                    allowed = {"triton", "trtllm_mha", "fa4"}
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
                ), "ascend backend is the only supported backend on NPU for hybrid GDN models, use --attention-backend ascend to specify the backend."
