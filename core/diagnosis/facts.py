"""Settings and pool sizes read from a log: what the engine was launched with and what it allocated.

They let a finding's advice fit the launch (a hint for XPU, for the wave backend ...) and let the
Diagnose tab show the allocated pools next to the planner's prediction.
"""

from __future__ import annotations

import re

# server_args=ServerArgs(model_path='...', device='xpu', tp_size=1, ...): the keys worth showing.
_ARG_KEYS = ("model_path", "device", "attention_backend", "linear_attn_backend", "mamba_radix_cache_strategy",
             "mamba_scheduler_strategy", "tp_size", "pp_size", "page_size", "disable_radix_cache",
             "disable_overlap_schedule", "mem_fraction_static", "mamba_ssm_dtype", "kv_cache_dtype",
             "max_running_requests", "chunked_prefill_size", "context_length")
_ARG = re.compile(r"(?P<key>\w+)=(?P<value>'[^']*'|\"[^\"]*\"|[^,()\s]+)")
_LINES = (
    ("kv_tokens", re.compile(r"KV Cache is allocated\. dtype: (?:torch\.)?\S+, #tokens: (?P<v>\d+)")),
    ("kv_cache_dtype_allocated", re.compile(r"KV Cache is allocated\. dtype: (?:torch\.)?(?P<v>[^\s,]+)")),
    ("mamba_cache_size", re.compile(r"Mamba Cache is allocated\. max_mamba_cache_size: (?P<v>\d+)")),
    ("max_total_num_tokens", re.compile(r"max_total_num_tokens=(?P<v>\d+)")),
    ("running_limit", re.compile(r"max_total_num_tokens=.*max_running_requests=(?P<v>\d+)")),
    ("avail_before_load_gb", re.compile(r"Load weight begin\. avail mem=(?P<v>[\d.]+) GB")),
    ("avail_after_load_gb", re.compile(r"Load weight end\..*avail mem=(?P<v>[\d.]+) GB")),
    ("page_size_changed_to", re.compile(r"changing page_size from \d+ to (?P<v>\d+)")),
    ("context_len", re.compile(r"max_total_num_tokens=.*context_len=(?P<v>\d+)")),
    ("attention_backend", re.compile(r"Use (?P<v>\w+) backend by default")),
    ("weights_gb", re.compile(r"Load weight end\..*mem usage=(?P<v>[\d.]+) GB")),
    ("sglang_version", re.compile(r"sglang(?:==| version:? ?v?)(?P<v>\d+\.\d+\.\d+)", re.IGNORECASE)),
    # vLLM's start-up lines (0.33.0: entrypoints/openai/api_server.py, v1/worker/gpu_model_runner.py:5089,
    # v1/worker/gpu_worker.py:773, v1/core/kv_cache_utils.py:1148)
    ("vllm_version", re.compile(r"vLLM API server version (?P<v>\d+\.\d+\.\d+\S*)|LLM engine \(v(?P<v2>\d+\.\d+\.\d+\S*)\)")),
    ("weights_gb", re.compile(r"Model loading took (?P<v>[\d.]+) GiB")),
    ("kv_memory_gb", re.compile(r"Available KV cache memory: (?P<v>[\d.]+) GiB")),
    ("kv_tokens", re.compile(r"KV cache size: (?P<v>[\d,]+) tokens")),
    ("max_concurrency", re.compile(r"Maximum concurrency for [\d,]+ tokens per request: (?P<v>[\d.]+)x")),
    ("block_size_raised_to", re.compile(r"Setting attention block size to (?P<v>\d+) tokens")),
    ("mamba_page_padding_pct", re.compile(r"Padding mamba page size by (?P<v>[\d.]+)%")),
)


def _value(text: str):
    text = text.strip("'\"")
    if re.fullmatch(r"\d{1,3}(?:,\d{3})+", text):  # vLLM prints token counts as 99,584
        text = text.replace(",", "")
    if text in ("True", "False"):
        return text == "True"
    if text == "None":
        return None
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


# A launch command in the log (`python -m sglang.launch_server --device xpu ...`).
_FLAG = re.compile(r"--(?P<key>device|attention-backend|linear-attn-backend|page-size|tp-size|tp|pp-size|"
                   r"mamba-radix-cache-strategy|mamba-scheduler-strategy|mem-fraction-static|model-path|model)"
                   r"(?:=|\s+)(?P<value>[^\s-][^\s]*)")
_SWITCH = re.compile(r"--(?P<key>disable-radix-cache|disable-overlap-schedule)\b")
_FLAG_NAMES = {"tp": "tp_size", "model": "model_path"}


def _launch_flags(line: str) -> dict:
    found = {}
    for m in _FLAG.finditer(line):
        key = m["key"].replace("-", "_")
        found[_FLAG_NAMES.get(key, key)] = _value(m["value"])
    for m in _SWITCH.finditer(line):
        found[m["key"].replace("-", "_")] = True
    return found


def read_facts(lines: list[str]) -> dict:
    """Launch settings and pool sizes. The resolved `server_args=ServerArgs(...)` line wins over a
    launch command; single-line facts (pool sizes, version) take their first occurrence."""
    text = "\n".join(lines)
    facts: dict = {}
    for line in _lines_with(text, "launch_server"):
        for key, value in _launch_flags(line).items():
            facts.setdefault(key, value)
    for line in _lines_with(text, "ServerArgs("):
        for m in _ARG.finditer(line[line.index("ServerArgs("):]):
            if m["key"] in _ARG_KEYS:
                facts[m["key"]] = _value(m["value"])
        break  # the first server_args line describes the launch
    for key, regex in _LINES:
        m = regex.search(text)
        if m and key not in facts:
            facts[key] = _value(next(v for v in m.groups() if v is not None))
    if "mamba_scheduler_strategy" in facts:
        facts.setdefault("mamba_radix_cache_strategy", facts["mamba_scheduler_strategy"])
        del facts["mamba_scheduler_strategy"]
    return {k: v for k, v in facts.items() if v is not None}


def _lines_with(text: str, needle: str):
    pos = text.find(needle)
    while pos != -1:
        start = text.rfind("\n", 0, pos) + 1
        end = text.find("\n", pos)
        end = len(text) if end == -1 else end
        yield text[start:end]
        pos = text.find(needle, end)


def facts_text(facts: dict) -> str:
    """The facts as `key='value'` text, so hint patterns can match them like log text."""
    return " ".join(f"{k}='{v}'" for k, v in facts.items())
