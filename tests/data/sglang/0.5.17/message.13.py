# sglang snippet: python/sglang/srt/layers/attention/linear/gdn_backend.py from line 45
    from sgl_kernel import causal_conv1d_fn_xpu, causal_conv1d_update_xpu
