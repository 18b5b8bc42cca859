# sglang snippet: python/sglang/srt/layers/attention/triton_backend.py from line 196
        if self.sliding_window_size is not None and swa_v_head_dim != full_v_head_dim:
            self.v_head_dim = full_v_head_dim
            self.swa_v_head_dim = swa_v_head_dim
        elif (
            hybrid_gdn_config(model_runner.model_config) is not None
            or kimi_linear_config(model_runner.model_config) is not None
            or linear_attn_model_spec(model_runner.model_config) is not None
        ):
            # For hybrid linear models, layer_id = 0 may not be full attention
            self.v_head_dim = model_runner.token_to_kv_pool.get_v_head_dim()
            self.swa_v_head_dim = None
        else:
            self.v_head_dim = model_runner.token_to_kv_pool.get_value_buffer(0).shape[
                -1
            ]
            self.swa_v_head_dim = None
