# sglang snippet: python/sglang/srt/model_executor/cuda_graph_config.py from line 119
def default_prefill_backend() -> str:
    """Enable BCG by default on CUDA; other platforms remain opt-in."""
    from sglang.srt.utils import is_cuda

    return Backend.BREAKABLE if is_cuda() else Backend.DISABLED
