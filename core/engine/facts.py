"""What the embedded engine runs and takes, stated once, without importing torch.

The engine builds from these facts (the model registry in `models/__init__.py` imports the classes
named here; `bringup serve` adds the options listed here), and everything that must know them
without loading the engine reads them here: the rules (`core/rules/embedded.py`), the launch
command (`core/launch/`), the planner and the GUI.

To add a model family to the engine: write its class under `models/`, then add one line to
`MODEL_CLASSES` below (config.json's model_type -> "module:Class"). Nothing else lists them.
"""

from __future__ import annotations

from dataclasses import dataclass

# config.json model_type -> the class that implements it, as "module under core/engine/models:Class".
# A string, so that reading the list never imports torch; `models.model_class_for` imports the class.
MODEL_CLASSES: dict[str, str] = {
    "nemotron_h": "nemotron_h:NemotronHForCausalLM",
    "llama": "llama:LlamaForCausalLM",
    "mistral": "llama:LlamaForCausalLM",
    "qwen2": "llama:LlamaForCausalLM",
    "qwen3": "llama:LlamaForCausalLM",
    "qwen3_moe": "llama:LlamaForCausalLM",
    "gemma2": "gemma:GemmaForCausalLM",
    "gemma3_text": "gemma:GemmaForCausalLM",
    "gpt_oss": "gpt_oss:GptOssForCausalLM",
    "granitemoehybrid": "granite_hybrid:GraniteMoeHybridForCausalLM",
    "bamba": "granite_hybrid:BambaForCausalLM",
    "falcon_h1": "falcon_h1:FalconH1ForCausalLM",
    "zamba2": "zamba2:Zamba2ForCausalLM",
    "jamba": "jamba:JambaForCausalLM",
    "qwen3_next": "qwen3_next:Qwen3NextForCausalLM",
    "qwen3_5_text": "qwen3_next:Qwen3NextForCausalLM",
    "qwen3_5_moe_text": "qwen3_next:Qwen3NextForCausalLM",
    "qwen3_5": "qwen3_next:Qwen3NextForCausalLM",
    "qwen3_5_moe": "qwen3_next:Qwen3NextForCausalLM",
    "lfm2": "lfm2:Lfm2ForCausalLM",
    "minimax": "minimax:MiniMaxForCausalLM",
    "minimax_m1": "minimax:MiniMaxForCausalLM",
    "minimax_text_01": "minimax:MiniMaxForCausalLM",
    "kimi_linear": "kimi_linear:KimiLinearForCausalLM",
}

# Multimodal model_types whose text decoder the engine runs: config.json nests the decoder's config in
# `text_config` (the engine builds from it, models.decoder_config), and the vision tower's weights are skipped.
TEXT_DECODER_WRAPPERS = frozenset({"qwen3_5", "qwen3_5_moe"})

DEVICES = ("cpu", "cuda", "xpu")  # torch's own device APIs (core/engine/device.py); "auto" picks one
DTYPES = ("auto", "float32", "bfloat16", "float16")  # model dtype; "auto": the checkpoint's
POOL_DTYPES = ("float32", "bfloat16", "float16")  # what the KV and state pools can hold (pools.as_dtype)
DEFAULT_PAGE_SIZE = 16  # tokens per KV page: EngineConfig(page_size=...)
DEFAULT_SSM_DTYPE = "float32"  # Mamba2 SSM state: EngineConfig(ssm_dtype=...)
DEFAULT_CHUNKED_PREFILL_SIZE = 2048  # prompt tokens per step when nothing else chooses


# Weight schemes (core/layermap/quantization.py keys) the engine runs as they are stored: fp8_e4m3
# with a scale per block, per output channel or per tensor (kernels/triton/fp8_linear.py W8A16 on
# GPUs, the dequantising reference on the CPU).
RUNNABLE_WEIGHT_SCHEMES = frozenset({"fp8_block", "fp8_channel", "fp8_tensor"})
# Model types whose layers take quantized linears (their MLPs and attention call the layer modules,
# or check for quantized ones); NemotronH also takes fp8 routed experts (fused MoE, no gate).
QUANTIZED_MODEL_TYPES = frozenset({"nemotron_h", "llama", "mistral", "qwen2", "qwen3", "qwen3_moe"})
# ... and those whose layers take a GGUF file's blocks (core/engine/gguf_weights.py): Gemma 3's
# attention and MLP call their layer modules as Llama's do (the real Gemma 3 270M Q4_K_M file).
GGUF_BLOCK_MODEL_TYPES = QUANTIZED_MODEL_TYPES | {"gemma3_text"}
# ... on these devices only (the CPU's products, core/engine/gguf_weights.py; no GPU kernel yet):
# elsewhere a GGUF file's blocks are dequantised at load, as an explicit dtype does.
GGUF_BLOCK_DEVICES = frozenset({"cpu"})


def gguf_blocks_refused(model_type: str | None, device_type: str) -> str:
    """Why the engine dequantises a GGUF file's blocks at load for this model type on this device
    ("" where its layers take them there; the block types with products are checked at load too)."""
    if device_type not in GGUF_BLOCK_DEVICES:
        return f"the engine multiplies GGUF blocks on the CPU only, not on {device_type}"
    if model_type not in GGUF_BLOCK_MODEL_TYPES:
        return f"{model_type}'s layers do not take blocks yet ({', '.join(sorted(GGUF_BLOCK_MODEL_TYPES))} do)"
    return ""


def refused_scheme_message(label: str, key: str, method: str, where: str, model_type: str | None = None) -> str:
    """The engine's words when a checkpoint's weight scheme cannot run as stored (quantized.py)."""
    if model_type is not None:
        what = f"the embedded engine does not run {label} weights for model_type {model_type!r} yet"
    else:
        what = f"the embedded engine cannot run {label} weights ({key}) yet"
    return (f"{method} checkpoint: {what} (first at {where}). Pass --dtype bfloat16 to dequantise the weights "
            f"at load and run them in bf16 (twice or more the weight memory), or serve it with SGLang or vLLM")


def supported_model_types() -> list[str]:
    return sorted(MODEL_CLASSES)


def unsupported_model_message(model_type, architectures) -> str:
    """The text of the engine's UnsupportedModelError (the rules quote it as the engine's own words).
    `architectures`: config.json's list, or one name, or nothing."""
    if isinstance(architectures, str):
        architectures = [architectures] if architectures else []
    archs = ", ".join(architectures or []) or "unknown architecture"
    return (f"model_type {model_type!r} ({archs}) is not supported by the embedded engine; it runs "
            f"{', '.join(supported_model_types())}. Serve this model with SGLang instead, or pick a supported one.")


def unknown_dtype_message(dtype) -> str:
    """The text of the ValueError the pools raise for a dtype torch does not have (pools.as_dtype)."""
    *first, last = POOL_DTYPES
    return f"unknown dtype {dtype!r}; use e.g. {', '.join(first)} or {last}"


@dataclass(frozen=True)
class ServeOption:
    """One option of `bringup serve` (core/cli/serve.py builds its parser from these)."""

    flag: str
    type: type = str
    default: object = None
    help: str = ""


# `bringup serve [SOURCE]`'s options, in --help order. The launch command only names options listed here.
SERVE_OPTIONS: tuple[ServeOption, ...] = (
    ServeOption("--device", str, "auto", "auto (an accelerator if there is one, else cpu), cpu, cuda, cuda:N, xpu or xpu:N"),
    ServeOption("--dtype", str, "auto", "auto (the checkpoint's), float32, bfloat16 or float16"),
    ServeOption("--load-format", str, "auto",
                "auto: the checkpoint's weights; dummy: the source's config (catalogue name, config.json, folder, "
                "hub id) at full size with seeded random weights made on the device (nothing downloaded or "
                "written; the text is noise)"),
    ServeOption("--cpu-threads", int, None, "on the CPU: torch threads (default: the cores idle at start, at least 1; "
                "a thread team stalls whenever another process takes one of its cores)"),
    ServeOption("--cpu-compile", str, "auto", "on the CPU: decode steps compiled with torch.compile (on: at start-up, "
                "a minute or more the first time, seconds once saved; auto: the same for bench, while serve decodes "
                "eagerly at once and switches to the compiled step once a child process has built it; off: eager "
                "steps; BRINGUP_CPU_COMPILE=0 makes auto off)"),
    ServeOption("--host", str, "127.0.0.1", "address to listen on (default 127.0.0.1: this machine only)"),
    ServeOption("--port", int, 30000, "port (default 30000; 0 picks a free one)"),
    ServeOption("--mem-fraction", float, None, "share of device memory for weights and pools (default: the planner's choice)"),
    ServeOption("--max-running-requests", int, None, "cap on requests running at once"),
    ServeOption("--chunked-prefill-size", int, None, "prompt tokens per step (chunk size; default: the planner's)"),
    ServeOption("--mixed-prefill-size", int, None, "prompt tokens in a step where running requests decode "
                "(default: the planner's, at most the chunk; smaller keeps their inter-token gaps short)"),
    ServeOption("--context", int, None, "tokens one request may reach (prompt + output), the pools planned for "
                "it (default: the planner's, at most the model's max_position_embeddings; SGLang: --context-length)"),
    ServeOption("--api-key", str, None, "require 'Authorization: Bearer KEY' on every route but /health and /ready "
                "(visible in `ps`: prefer --api-key-file or $BRINGUP_API_KEY)"),
    ServeOption("--api-key-file", str, None, "read the API key from this file (its first line)"),
    ServeOption("--served-model-name", str, None, "name reported by /v1/models"),
    ServeOption("--model-aliases", str, None, "comma-separated other names a request's `model` may use "
                "('default' and the source as given are always accepted)"),
    ServeOption("--allowed-hosts", str, None, "comma-separated host names accepted in the Host header besides "
                "localhost and IP addresses ('*': any); guards against DNS rebinding"),
    ServeOption("--max-body-bytes", int, None, "largest request body (default: from the pools, 1-16 MiB); bigger gets 413"),
    ServeOption("--max-prompts-per-request", int, None, "most prompts in one request (default: running + queued requests)"),
    ServeOption("--max-queued-requests", int, None, "requests admitted beyond those running; more get 429 "
                "(default: max(64, 8 x running))"),
    ServeOption("--max-queued-tokens", int, None, "tokens of work (prompt + max_tokens) admitted at once; more get 429 "
                "(default: 8 x the KV pool)"),
    ServeOption("--drain-grace", float, None, "on SIGTERM/SIGINT, seconds running requests get to finish (default 30)"),
)
# Options shared by every command that runs the engine (`serve`, `bench`): what it loads and where.
MODEL_OPTIONS = ("--device", "--dtype", "--load-format", "--cpu-threads", "--cpu-compile")


CPU_COMPILE_CHOICES = {"auto": None, "on": True, "off": False}


def cpu_compile_choice(value: str) -> bool | None:
    """--cpu-compile's value as Engine's `cpu_compile` (None: the engine's default)."""
    key = str(value).strip().lower()
    if key not in CPU_COMPILE_CHOICES:
        from bringup.core.errors import UserError

        raise UserError(f"--cpu-compile {value!r} is not a choice; use auto, on or off")
    return CPU_COMPILE_CHOICES[key]


def serve_option(flag: str) -> ServeOption:
    return next(o for o in SERVE_OPTIONS if o.flag == flag)


def serve_flags() -> frozenset[str]:
    return frozenset(o.flag for o in SERVE_OPTIONS)
