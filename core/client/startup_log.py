"""Follow an engine's start-up from its log lines: stage, progress and the pool sizes it reports.

Our engine prints SGLang-style lines on purpose, so one parser serves both (sglang-notes §5.4):
  Load weight begin. avail mem=... GB
  Load weight end. elapsed=... s, type=..., avail mem=... GB, mem usage=... GB.
  KV Cache is allocated. dtype: ..., #tokens: N, K size: ... GB, V size: ... GB
  Mamba Cache is allocated. max_mamba_cache_size: S, conv_state size: ...GB, ssm_state size: ...GB
  CPU: compiling the decode step ... / CPU: decode step compiled (or loaded) in N s (ours, on the CPU)
  max_total_num_tokens=N, chunked_prefill_size=..., max_running_requests=R, ...
  Uvicorn running on http://127.0.0.1:PORT
  The server is fired up and ready to roll!

vLLM logs its start-up in words of its own (VLLM_STAGES, VLLM_FIGURES: file:line in vllm 0.33.0), and
is ready when uvicorn says "Application startup complete." (uvicorn/lifespan/on.py): vLLM serves
nothing before its engine core is up (v1/engine/core.py), so that line comes last.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# (stage, progress 0..1, pattern); the last matching stage wins, stages only move forward.
STAGES: list[tuple[str, float, re.Pattern]] = [
    ("loading weights", 0.15, re.compile(r"Load weight begin")),
    ("weights loaded", 0.55, re.compile(r"Load weight end")),
    ("KV pool allocated", 0.7, re.compile(r"KV Cache is allocated")),
    ("state pool allocated", 0.8, re.compile(r"Mamba Cache is allocated")),
    # CPU: the decode step compiles at start-up (a minute or more the first time: the bar says why it waits)
    ("compiling the decode step", 0.82, re.compile(r"CPU: compiling the decode step")),
    ("decode step compiled", 0.88, re.compile(r"CPU: decode step (?:compiled|loaded) in|CPU: compiling the decode step failed")),
    ("serving", 0.9, re.compile(r"Uvicorn running on|max_total_num_tokens=")),
    ("ready", 1.0, re.compile(r"The server is fired up and ready to roll")),
]

_FIGURES: list[tuple[str, re.Pattern, type]] = [
    ("weights_gb", re.compile(r"Load weight end\..*?mem usage=([\d.]+) GB"), float),
    ("weights_seconds", re.compile(r"Load weight end\. elapsed=([\d.]+) s"), float),
    ("model_class", re.compile(r"Load weight end\..*?type=([\w.]+)"), str),
    ("avail_mem_gb", re.compile(r"avail mem=([\d.]+) GB"), float),
    ("kv_tokens", re.compile(r"KV Cache is allocated\..*?#tokens: (\d+)"), int),
    ("kv_dtype", re.compile(r"KV Cache is allocated\. dtype: ([\w.]+)"), str),
    ("k_size_gb", re.compile(r"K size: ([\d.]+) GB"), float),
    ("v_size_gb", re.compile(r"V size: ([\d.]+) GB"), float),
    ("state_slots", re.compile(r"max_mamba_cache_size: (\d+)"), int),
    ("conv_state_gb", re.compile(r"conv_state size: ([\d.]+) ?GB"), float),
    ("ssm_state_gb", re.compile(r"ssm_state size: ([\d.]+) ?GB"), float),
    ("max_total_num_tokens", re.compile(r"max_total_num_tokens=(\d+)"), int),
    ("max_running_requests", re.compile(r"max_running_requests=(\d+)"), int),
    ("context_len", re.compile(r"context_len=(\d+)"), int),
    ("port", re.compile(r"Uvicorn running on https?://[^:\s]+:(\d+)"), int),
    ("cpu_compile_seconds", re.compile(r"CPU: decode step (?:compiled|loaded) in ([\d.]+) s"), float),
    # serve's --cpu-compile auto: eager steps first, the compiled step built beside them and switched in
    ("cpu_compiled_in_use_seconds", re.compile(r"CPU: compiled decode step in use after ([\d.]+) s"), float),
]

VLLM_STAGES: list[tuple[str, float, re.Pattern]] = [
    ("starting engine", 0.1, re.compile(r"Initializing a V1 LLM engine")),  # v1/engine/core.py:140
    ("loading weights", 0.15, re.compile(r"Starting to load model")),  # v1/worker/gpu_model_runner.py:4979
    ("weights loaded", 0.55, re.compile(r"Model loading took")),  # gpu_model_runner.py:5089
    ("KV pool allocated", 0.7, re.compile(r"KV cache size: [\d,]+ tokens")),  # v1/core/kv_cache_utils.py:1147-1154
    ("graphs captured", 0.8, re.compile(r"Graph capturing finished")),  # gpu_model_runner.py:6517
    # entrypoints/launchers/api_server/entry.py:139; 0.10.2: "Starting vLLM API server %d on %s" (openai/api_server.py:1971)
    ("serving", 0.9, re.compile(r"Starting vLLM (?:API )?server")),
    ("ready", 1.0, re.compile(r"Application startup complete")),  # uvicorn/lifespan/on.py
]

VLLM_FIGURES: list[tuple[str, re.Pattern, type]] = [
    ("weights_gb", re.compile(r"Model loading took ([\d.]+) GiB"), float),
    ("weights_seconds", re.compile(r"Model loading took [\d.]+ GiB memory and ([\d.]+) seconds"), float),
    ("kv_memory_gb", re.compile(r"Available KV cache memory: ([\d.]+) GiB"), float),  # v1/worker/gpu_worker.py:773
    ("kv_tokens", re.compile(r"KV cache size: ([\d,]+) tokens"), lambda v: int(v.replace(",", ""))),
    ("max_concurrency", re.compile(r"Maximum concurrency for [\d,]+ tokens per request: ([\d.]+)x"), float),
    ("port", re.compile(r"Starting vLLM (?:API )?server(?: \d+)? on https?://[^\s]*:(\d+)"), int),
]

# `bringup serve: ...` is how our own commands report bad input before exiting 2 (bringup/cli.py).
_ERROR = re.compile(r"Traceback \(most recent call last\)|^\s*\w*(Error|Exception)\b|\bERROR\b|\bFATAL\b|CRITICAL"
                    r"|^bringup [a-z]+: ")
_WARNING = re.compile(r"\bWARNING\b|\bWARN\b|\bwarning:", re.IGNORECASE)


def line_severity(line: str) -> str:
    """error | warning | info, for colouring the log console."""
    if _ERROR.search(line):
        return "error"
    if _WARNING.search(line):
        return "warning"
    return "info"


@dataclass
class StartupState:
    stage: str = "starting"
    progress: float = 0.0
    figures: dict = field(default_factory=dict)
    engine: str = "sglang"  # "vllm" reads vLLM's own lines; our engine and SGLang share SGLang's

    @property
    def ready(self) -> bool:
        return self.stage == "ready"

    def feed(self, line: str) -> bool:
        """Read one log line; True when the stage or a figure changed."""
        changed = False
        vllm = self.engine == "vllm"
        for stage, progress, pattern in (VLLM_STAGES if vllm else STAGES):
            if progress > self.progress and pattern.search(line):
                self.stage, self.progress, changed = stage, progress, True
        for key, pattern, kind in (VLLM_FIGURES if vllm else _FIGURES):
            m = pattern.search(line)
            if m:
                self.figures[key] = kind(m.group(1))
                changed = True
        return changed
