# sglang snippet: python/sglang/srt/hardware_backend/xpu/attention/xpu_gdn_backend.py from line 34
                "--linear-attn-backend intel_xpu requires the "
# sglang snippet: python/sglang/srt/arg_groups/validation_hook.py from line 484
            f"--sampling-backend intel_xpu requires --device xpu, got --device {device}"
# sglang snippet: python/sglang/srt/layers/attention/attention_registry.py from line 559
                    "Expected hybrid GDN or NemotronH models, but got unknown model. "
# sglang snippet: python/sglang/srt/entrypoints/http_server.py from line 777
        f"Health check failed. Server couldn't get a response from detokenizer for last "
# sglang snippet: python/sglang/srt/mem_cache/kv_cache_configurator.py from line 2835
                    f"Hybrid (mamba/linear-attention) state cache is too small to serve "
# sglang snippet: python/sglang/srt/configs/mamba_utils.py from line 88
                    f"Invalid mamba_ssm_dtype '{config_dtype}' in config. "
# sglang snippet: python/sglang/srt/mem_cache/kv_cache_configurator.py from line 2756
                    "Lazy extra buffer requires overlap schedule (--disable-overlap-schedule is incompatible)"
# sglang snippet: python/sglang/srt/mem_cache/kv_cache_configurator.py from line 2732
                f"Loaded weights leave no GPU memory for the KV cache under "
# sglang snippet: python/sglang/srt/mem_cache/kv_cache_configurator.py from line 3068
                f"Not enough GPU memory for hybrid (mamba/linear-attention) state cache. "
# sglang snippet: python/sglang/srt/mem_cache/memory_pool.py from line 1610
                    f"Not enough space for mamba cache, try to increase --mamba-full-memory-ratio or --max-mamba-cache-size. {mid=}, {self.mamba_pool.size=}, {self.mamba_allocator.available_size()=}, {len(reqs)=}"
# sglang snippet: python/sglang/srt/mem_cache/memory_pool.py from line 1632
                "Not enough space for mamba ping pong idx, try to increase --mamba-full-memory-ratio."
# sglang snippet: python/sglang/srt/configs/nemotron_h.py from line 501
                "Pattern must only contain characters 'M', '*', '-' or 'E'. "
# sglang snippet: python/sglang/srt/layers/attention/attention_registry.py from line 516
                        "are not yet supported on NPU: the conv-state sidecar "
# sglang snippet: python/sglang/srt/layers/attention/attention_registry.py from line 470
                    f"Only {allowed} backends are supported on Blackwell GPUs for hybrid GDN models. "
# sglang snippet: python/sglang/srt/arg_groups/validation_hook.py from line 244
            "chunked_prefill_size must be divisible by page_size"
# sglang snippet: python/sglang/srt/arg_groups/overrides.py from line 1280
            "The current platform does not support Intel XMX, will fallback to triton backend."
# sglang snippet: python/sglang/srt/arg_groups/overrides.py from line 1867
            f"For SSM models, either chunk_size or page_size must be divisible by the other, got {chunk_size=}, {page_size=}"
# sglang snippet: python/sglang/srt/arg_groups/mamba_hook.py from line 118
        f"extra_buffer is not supported for {hf_config.architectures[0]}; use no_buffer."
# sglang snippet: python/sglang/srt/arg_groups/mamba_hook.py from line 126
            "extra_buffer_lazy unsupported under PD disaggregation; use "
# sglang snippet: python/sglang/srt/mem_cache/kv_cache_configurator.py from line 2783
                    f"max_total_tokens={user_limit} is larger than the profiled value "
# sglang snippet: python/sglang/srt/mem_cache/kv_cache_configurator.py from line 2822
                    "max_running_requests is capped to %d by the mamba state "
# sglang snippet: python/sglang/srt/hardware_backend/mlx/model_runner_stub.py from line 239
                "max_running_requests was reduced from the requested %d to %d "
# sglang snippet: python/sglang/srt/mem_cache/memory_pool.py from line 4381
                f"{layer_id=} not in full attention layers: {self.full_attention_layer_id_mapping.keys()}"
