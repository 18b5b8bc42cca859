# sglang snippet: python/sglang/srt/layers/attention/mamba/mamba.py from line 59
        causal_conv1d_update_npu as causal_conv1d_update,
    )
elif is_xpu():
    # XPU has no native causal_conv1d kernel yet; use the portable Triton
    # implementation for both the "native" and the "_triton" entry points so
