# sglang snippet: python/sglang/srt/layers/attention/triton_backend.py from line 290
        if self.sliding_window_size is not None and swa_v_head_dim != full_v_head_dim:
            self.v_head_dim = full_v_head_dim
            self.swa_v_head_dim = swa_v_head_dim
        elif mambaish_config(model_runner.model_config) is not None:
            # For hybrid linear models, layer_id = 0 may not be full attention
            # (e.g. NemotronH's full-attn layers are [5,12,19,...]). mambaish_config
            # unions mamba2 (NemotronH/FalconH1/...), hybrid-GDN, kimi-linear, and
            # linear-attn specs, so we ask get_v_head_dim() instead of indexing
            # layer 0, which is not guaranteed to be a full-attention layer.
            self.v_head_dim = model_runner.token_to_kv_pool.get_v_head_dim()
            self.swa_v_head_dim = None
        else:
            # Use start_layer instead of 0 to handle pipeline parallelism.
            # In PP, start_layer may be > 0, so layer 0 isn't in this stage's buffer.
            self.v_head_dim = model_runner.token_to_kv_pool.get_value_buffer(
                model_runner.token_to_kv_pool.start_layer
            ).shape[-1]
            self.swa_v_head_dim = None
