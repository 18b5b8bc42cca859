# sglang snippet: python/sglang/srt/layers/attention/attention_registry.py from line 42
HYBRID_GDN_SM100_BACKENDS = {"triton", "trtllm_mha", "fa4", "flashinfer"}
