# sglang snippet: python/sglang/srt/layers/attention/attention_registry.py from line 476
                    "Expected hybrid GDN or NemotronH models, but got unknown model. "
# sglang snippet: python/sglang/srt/entrypoints/http_server.py from line 719
        f"Health check failed. Server couldn't get a response from detokenizer for last "
# sglang snippet: python/sglang/srt/mem_cache/kv_cache_configurator.py from line 1908
                    f"Hybrid (mamba/linear-attention) state cache is too small to serve "
# sglang snippet: python/sglang/srt/configs/mamba_utils.py from line 88
                    f"Invalid mamba_ssm_dtype '{config_dtype}' in config. "
# sglang snippet: python/sglang/srt/mem_cache/kv_cache_configurator.py from line 1834
                ), "Lazy extra buffer requires overlap schedule (--disable-overlap-schedule is incompatible)"
# sglang snippet: python/sglang/srt/mem_cache/kv_cache_configurator.py from line 1802
                f"Loaded weights leave no GPU memory for the KV cache under "
# sglang snippet: python/sglang/srt/mem_cache/kv_cache_configurator.py from line 2118
                f"Not enough GPU memory for hybrid (mamba/linear-attention) state cache. "
# sglang snippet: python/sglang/srt/mem_cache/memory_pool.py from line 1325
                ), f"Not enough space for mamba cache, try to increase --mamba-full-memory-ratio or --max-mamba-cache-size. {mid=}, {self.mamba_pool.size=}, {self.mamba_allocator.available_size()=}, {len(reqs)=}"
# sglang snippet: python/sglang/srt/mem_cache/memory_pool.py from line 1351
            ), "Not enough space for mamba ping pong idx, try to increase --mamba-full-memory-ratio."
# sglang snippet: python/sglang/srt/configs/nemotron_h.py from line 501
                "Pattern must only contain characters 'M', '*', '-' or 'E'. "
# sglang snippet: python/sglang/srt/layers/attention/attention_registry.py from line 434
                        "are not yet supported on NPU: the conv-state sidecar "
# sglang snippet: python/sglang/srt/layers/attention/attention_registry.py from line 399
                    f"Only {allowed} backends are supported on Blackwell GPUs for hybrid GDN models. "
# sglang snippet: python/sglang/srt/layers/attention/linear/gdn_backend.py from line 46
    from sgl_kernel import causal_conv1d_fn_xpu, causal_conv1d_update_xpu
# sglang snippet: python/sglang/srt/server_args.py from line 9204
            ), "chunked_prefill_size must be divisible by page_size"
# sglang snippet: python/sglang/srt/arg_groups/overrides.py from line 2336
            "The current platform does not support Intel XMX, will fallback to triton backend."
# sglang snippet: python/sglang/srt/server_args.py from line 9110
            ), f"For SSM models, either chunk_size or page_size must be divisible by the other, got {chunk_size=}, {page_size=}"
# sglang snippet: python/sglang/srt/server_args.py from line 5808
        ), f"extra_buffer is not supported for {model_arch}; use no_buffer."
# sglang snippet: python/sglang/srt/server_args.py from line 5815
                "extra_buffer_lazy unsupported under PD disaggregation; use "
# sglang snippet: python/sglang/srt/mem_cache/kv_cache_configurator.py from line 1856
                    f"max_total_tokens={user_limit} is larger than the profiled value "
# sglang snippet: python/sglang/srt/mem_cache/kv_cache_configurator.py from line 1895
                    "max_running_requests is capped to %d by the mamba state "
# sglang snippet: python/sglang/srt/hardware_backend/mlx/model_runner_stub.py from line 216
                "max_running_requests was reduced from the requested %d to %d "
# sglang snippet: python/sglang/srt/mem_cache/memory_pool.py from line 3756
                f"{layer_id=} not in full attention layers: {self.full_attention_layer_id_mapping.keys()}"
