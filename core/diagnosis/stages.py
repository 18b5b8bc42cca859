"""The start-up stage a log reached, and the one it died in.

An engine starts in the same order everywhere: arguments are checked, the distributed group is set
up, the model is built and its weights loaded, the KV/state pools are sized and allocated, graphs
are captured (or the model compiled), then requests run. Each stage has words its progress lines
print and function names its traceback frames carry (SGLang, vLLM, llama.cpp, transformers alike).
"""

from __future__ import annotations

import re

STAGES = ("arguments", "distributed", "model_load", "kv_cache", "graph_capture", "runtime")
LABELS = {"arguments": "argument check", "distributed": "distributed set-up", "model_load": "model build and weight load",
          "kv_cache": "KV/state pool sizing", "graph_capture": "graph capture", "runtime": "serving"}

# Progress lines: a stage that printed one was reached.
_PROGRESS = {
    "arguments": r"server_args=ServerArgs|non-default args|Namespace\(|llm_engine\.py.*Initializing an LLM engine|"
                 r"Initializing a V1 LLM engine|vLLM API server version|build(?:_info)?: \d+|^version: \d+",
    "distributed": r"Init torch distributed|init_distributed_environment|world_size=\d+|NCCL version|oneCCL",
    "model_load": r"Load weight begin|Loading safetensors|Loading weights|Starting to load model|load_model|"
                  r"Loading checkpoint shards|llama_model_load|llama_model_loader|Loading model weights took|"
                  r"Model loading took|print_info:|Loading MLX model|fitting params to device memory|Resolved architecture",
    "kv_cache": r"KV Cache is allocated|Mamba Cache is allocated|GPU KV cache size|KV cache size:|"
                r"Available KV cache memory|Maximum concurrency for|llama_kv_cache|llama_context:|max_total_num_tokens=",
    "graph_capture": r"Capturing batches|Capturing CUDA graph|Graph capturing finished|torch\.compile|"
                     r"Compiling a graph|capture_model|cuda graph",
    "runtime": r"The server is fired up|Application startup complete|Prompt executed|toks/s|tok/s|"
               r"launch_slot_|prompt processing|Decode batch|Prefill batch|POST /v1/|"
               r"^\s*\d+%\|[^|]*\| *\d+/\d+ \[",  # an unlabelled progress bar: requests being served
}
# Frames (function or file names) and failure wording that place a failure in a stage.
_WHERE = {
    "arguments": r"verify_with_parallel_config|__post_init__|check_server_args|_handle_\w+_args|from_cli_args|"
                 r"divisible by tensor parallel|create_engine_config|parse_args|argument --",
    "distributed": r"init_worker_distributed_environment|init_distributed|all_reduce|ncclAllReduce|pynccl|"
                   r"init_process_group|oneCCL|XCCL|NCCL error",
    "model_load": r"load_model|load_weights|_load_module|make_layers|init_model_worker|_init_model_runner|"
                  r"maybe_init_draft_worker|draft_worker|ModelConfig\(|_initialize_model|get_model|from_pretrained|"
                  r"llama_model_load|missing tensor|error loading model|_compute_inv_freq|size mismatch for|"
                  r"models/\w+\.py:\d+\)$|[\w.]+\.\d+\.[\w.]*(?:weight|bias|_scale|absmax|w\d_weight)'",
    "kv_cache": r"initialize_kv_cache|initialize_from_config|_initialize_kv_caches|determine_available_memory|"
                r"init_memory_pool|profile_run|kv_cache_configurator|_handle_max_mamba_cache|llama_kv_cache|"
                r"KV cache is needed|Mamba cache blocks|initialize_attn_backend|type_k|kv_size",
    "graph_capture": r"capture_one_batch_size|capture_model|cuda_graph_runner|capture_begin|\bcapture\b|"
                     r"CudaGraphRunner|_dummy_run|torch\._dynamo|compile_or_warm_up",
    "runtime": r"forward_batch|execute_model|generate|step_async|run_batch|sample|sampling|slot_|"
               r"event_loop|process_input_requests|forward_decode|forward_extend",
}
_PROGRESS_RE = {k: re.compile(v) for k, v in _PROGRESS.items()}
_WHERE_RE = {k: re.compile(v) for k, v in _WHERE.items()}


def _order(stage: str | None) -> int:
    return STAGES.index(stage) if stage in STAGES else -1


def stage_of_text(text: str) -> str | None:
    """The stage a frame's function or a failure's wording belongs to (the latest when several match)."""
    hits = [s for s, regex in _WHERE_RE.items() if regex.search(text)]
    return max(hits, key=_order) if hits else None


def progress(lines: list[str], until: int | None = None, index=None) -> list[tuple[str, int]]:
    """(stage, 1-based line) for each stage whose progress line appears before `until`, in start-up order.
    Each stage's regex runs only on the lines holding one of its literal needles."""
    from .line_index import LineIndex
    from .needles import needles

    index = index or LineIndex(lines)
    stop = len(lines) if until is None else min(until, len(lines))
    seen: dict[str, int] = {}
    for stage, regex in _PROGRESS_RE.items():
        parts = [needles(alt) for alt in _PROGRESS[stage].split("|")]
        words = [n for p in parts if p for n in p] + ([] if all(parts) else ["%|"])
        first = index.first_line(words, regex.search, stop)
        if first is not None:
            seen[stage] = first + 1
    return sorted(seen.items(), key=lambda kv: _order(kv[0]))


def _short(frame_text: str) -> str:
    """`func code (file:line)` as `func (file:line)` for the reason shown to people."""
    func, _, rest = frame_text.partition(" ")
    where = rest[rest.rfind("("):] if "(" in rest else ""
    return f"{func} {where}".strip()


def failure_stage(frames_text: list[str], failure_text: str, reached: list[tuple[str, int]],
                  context: str = "") -> tuple[str | None, str]:
    """The stage the failure happened in, and why: the innermost traceback frame that names a stage,
    else the failure's own wording, else the last stage the log's progress lines reached; the latest
    of the frame's and the progress's stage wins (outer frames such as a worker's __init__ hold later stages)."""
    frame_stage = None
    for text in reversed(frames_text):
        frame_stage = stage_of_text(text)
        if frame_stage:
            why = f"the traceback passes through {_short(text)}"
            break
    text_stage = stage_of_text(failure_text) or stage_of_text(context)
    last = reached[-1][0] if reached else None
    candidates = [(frame_stage, "frame"), (text_stage, "message"), (last, "progress")]
    best = max((c for c in candidates if c[0]), key=lambda c: _order(c[0]), default=(None, ""))
    if best[0] is None:
        return None, "the log names no start-up stage"
    if best[1] == "frame":
        return best[0], why
    if best[1] == "message":
        return best[0], "the failure's own words belong to it"
    return best[0], f"the last start-up line before the failure is of this stage (line {reached[-1][1]})"
