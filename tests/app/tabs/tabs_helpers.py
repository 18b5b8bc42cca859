"""Shared pieces of the tab tests: the real model configs of ../shared/models, read in place."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from repo_paths import SHARED_MODELS

MODELS = SHARED_MODELS
NEMOTRON_NANO = MODELS / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B.json"
LFM2 = MODELS / "LiquidAI__LFM2-2.6B.json"
QWEN3_NEXT = MODELS / "Qwen__Qwen3-Next-80B-A3B-Instruct.json"
LLAMA = MODELS / "meta-llama__Meta-Llama-3.1-8B.json"


@lru_cache(maxsize=None)
def layer_map(path: Path):
    from bringup.core.sources.resolve import load_layer_map

    return load_layer_map(str(path))

# A launch of Nemotron-3-Nano on XPU with SGLang 0.5.17 and the triton backend, as its log reads
# (start-up lines and the traceback of PR #32227's second crash).
LAYER0_CRASH_LOG = """\
[2026-07-23 10:00:00] server_args=ServerArgs(model_path='nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16', device='xpu', tp_size=1, attention_backend=None, mamba_scheduler_strategy='no_buffer', disable_overlap_schedule=True)
[2026-07-23 10:00:01] Attention backend not specified. Use triton backend by default.
[2026-07-23 10:00:04 TP0] Load weight begin. avail mem=22.10 GB
[2026-07-23 10:01:10 TP0] Load weight end. elapsed=66.02 s, type=NemotronHForCausalLM, avail mem=4.12 GB, mem usage=17.98 GB.
[2026-07-23 10:01:11 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 180224, K size: 0.52 GB, V size: 0.52 GB
[2026-07-23 10:01:11 TP0] Mamba Cache is allocated. max_mamba_cache_size: 24, conv_state size: 0.02GB, ssm_state size: 1.08GB 
[2026-07-23 10:01:12 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File "/opt/sglang/python/sglang/srt/managers/scheduler.py", line 2871, in run_scheduler_process
    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)
  File "/opt/sglang/python/sglang/srt/model_executor/model_runner.py", line 1931, in init_attention_backend
    self.attn_backend = self._get_attention_backend()
  File "/opt/sglang/python/sglang/srt/layers/attention/triton_backend.py", line 101, in __init__
    self.v_head_dim = model_runner.token_to_kv_pool.get_value_buffer(0).shape[-1]
  File "/opt/sglang/python/sglang/srt/mem_cache/memory_pool.py", line 3649, in get_value_buffer
    layer_id = self._transfer_full_attention_id(layer_id)
  File "/opt/sglang/python/sglang/srt/mem_cache/memory_pool.py", line 3601, in _transfer_full_attention_id
    raise ValueError(
ValueError: layer_id=0 not in full attention layers: dict_keys([5, 12, 19, 26, 33, 42])

[2026-07-23 10:01:12] Received sigquit from a child process. It usually means the child failed.
"""
