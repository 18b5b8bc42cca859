#!/usr/bin/env python3
"""Maintainer script: check the vLLM facts the workbench keeps (core/rules/vllm_facts.py, the planner in
core/planner/vllm.py, the `vllm:` metric names in core/client/metrics_scrape.py, the start-up lines in
core/client/startup_log.py) against a vLLM release's own source, line by line.

    python tools/vllm_facts.py 0.33.0                 # download the wheel (no deps), check: exit 1 on a difference
    python tools/vllm_facts.py 0.10.2 --find          # another release: where each fact is now, or that it is absent
    python tools/vllm_facts.py --wheel path/to/vllm-X.whl   # or an unpacked wheel folder

Only the package index is contacted (`pip download --no-deps`); vLLM itself is never imported.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

# (what, file under vllm/, line as cited for 0.33.0, a regex the line holds[, the value core/ uses: the
# regex's (?P<v>...) must read it there])
PROBES = [
    ("block size default 16", "config/cache.py", 185, r"DEFAULT_BLOCK_SIZE: ClassVar\[int\] = (?P<v>\d+)", "16"),
    ("gpu_memory_utilization 0.92", "config/cache.py", 215, r"gpu_memory_utilization: float = (?:Field\(default=)?(?P<v>[\d.]+)", "0.92"),
    ("prefix caching on by default", "config/cache.py", 257, r"enable_prefix_caching: (?:Optional\[bool\]|bool \| None|bool) = (?P<v>\w+)", "True"),
    ("requested = ceil(total x util)", "v1/worker/utils.py", 724, r"requested_memory = math\.ceil"),
    ("available KV memory", "v1/worker/gpu_worker.py", 753, r"self\.available_kv_cache_memory_bytes = \("),
    ("num_blocks = available // bytes_per_block", "v1/core/kv_cache_planning.py", 681,
     r"num_blocks = available_memory // bytes_per_block"),
    ("group size: min, or max within 1.5x", "v1/core/kv_cache_planning.py", 524, r"max_num_layers < min_num_layers \* 1\.5"),
    ("attention blocks per request", "v1/kv_cache_interface.py", 648,
     r"return cdiv\(max_model_len, self\.block_size\) \* self\.page_size_bytes"),
    ("Mamba blocks per request by mamba_cache_mode", "v1/kv_cache_interface.py", 1136, r'mamba_cache_mode == "align"'),
    ("max concurrency over all groups", "v1/core/kv_cache_utils.py", 1061, r"def get_max_concurrency_for_kv_cache_config"),
    ("max_num_seqs above the Mamba blocks", "config/compilation.py", 1526,
     r"max_num_seqs \(\{max_num_reqs\}\) exceeds available Mamba cache"),
    ("attention block raised to the Mamba page", "platforms/interface.py", 1109, r"Setting attention block size to %d tokens"),
    ("Mamba page padded", "platforms/interface.py", 1133, r"Padding mamba page size by"),
    ("no alignment on a rank without attention", "platforms/interface.py", 764, r"if not backend_classes:"),
    ("max_num_seqs 1024 on >= 160 GiB", "engine/arg_utils.py", 2973, r"device_memory >= (?P<v>\d+) \* GiB_bytes", "160"),
    ("PP split", "distributed/utils.py", 198, r"def get_pp_indices"),
    # found by the oracle (issue 31; tools/oracle/vllm_cells.py), kept in core/rules/vllm_facts.py
    ("CPU has the hybrid KV cache", "platforms/cpu.py", 649, r"def support_hybrid_kv_cache"),
    ("CPU starts from a 128-token block", "platforms/cpu.py", 563, r"backend_classes, (?P<v>\d+), vllm_config", "128"),
    ("CPU attention in 32-token blocks", "v1/attention/backends/cpu_attn.py", 66, r"return \[MultipleOf\((?P<v>\d+)\)\]", "32"),
    ("CPU SSM cache reset to float32", "platforms/cpu.py", 335, r"Reset SSM cache type to float32"),
    ("XPU FlashAttention in 64-token blocks", "v1/attention/backends/flash_attn.py", 361,
     r"return \[MultipleOf\((?P<v>\d+)\)\]", "64"),
    ("XPU FlashAttention prefers 64", "v1/attention/backends/flash_attn.py", 378,
     r"return max\(default_block_size, (?P<v>\d+)\)", "64"),
    ("XPU float32 runs Triton first", "platforms/xpu.py", 255, r"elif dtype == torch\.float32:"),
    ("XPU MLA takes TRITON_MLA", "platforms/xpu.py", 161, r"if selected_backend == AttentionBackendEnum\.TRITON_MLA:"),
    ("GDN FlashInfer checkpoints", "v1/attention/backends/gdn_attn.py", 34,
     r"FLASHINFER_GDN_CHECKPOINT_ALIGNMENT = (?P<v>\d+)", "64"),
    ("GDN FlashInfer prefill on sm90", "model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py", 249,
     r"if current_platform\.is_device_capability\(90\):"),
    ("block a multiple of the prefill checkpoints", "platforms/interface.py", 1093,
     r"get_mamba_prefill_checkpoint_alignment\(vllm_config\) or 1"),
    ("FA4 head-256 pages", "v1/attention/backends/fa_utils.py", 14, r"FA4_HD256_PAGE_SIZE = (?P<v>\d+)", "128"),
    ("float16 refused for gemma3", "config/model.py", 2401, r'"gemma3_text": "Numerical instability'),
    ("MXFP4 runs bfloat16", "model_executor/layers/quantization/mxfp4.py", 80, r"return \[torch\.bfloat16\]"),
    ("FlashMLA dense on Hopper only", "v1/attention/ops/flashmla.py", 57, r"FlashMLA Dense is only supported on Hopper"),
    ("no valid attention backend", "platforms/cuda.py", 473, r"No valid attention backend found for"),
    ("MLA hybrids align to 128", "platforms/interface.py", 1088,
     r"kernel_block_alignment_size = max\(kernel_block_alignment_size, (?P<v>\d+)\)", "128"),
    ("KDA recurrent state float32 by default", "model_executor/layers/mamba/mamba_utils.py", 141,
     r"recurrent_state_dtype = torch\.float32"),
    ("offloading block-size assert", "distributed/kv_transfer/kv_connector/v1/offloading/config.py", 115,
     r"tokens_per_block=\{tokens_per_block\} not divisible by"),
    ("metric num_requests_running", "v1/metrics/loggers.py", 528, r'"vllm:num_requests_running"'),
    ("metric num_requests_waiting", "v1/metrics/loggers.py", 538, r'"vllm:num_requests_waiting"'),
    ("metric kv_cache_usage_perc", "v1/metrics/loggers.py", 620, r'"vllm:kv_cache_usage_perc"'),
    ("metric prompt_tokens", "v1/metrics/loggers.py", 748, r'"vllm:prompt_tokens"'),
    ("metric generation_tokens", "v1/metrics/loggers.py", 799, r'"vllm:generation_tokens"'),
    ("metric request_success", "v1/metrics/loggers.py", 809, r'"vllm:request_success"'),
    ("metric time_to_first_token_seconds", "v1/metrics/loggers.py", 931, r'"vllm:time_to_first_token_seconds"'),
    ("metric inter_token_latency_seconds", "v1/metrics/loggers.py", 941, r'"vllm:inter_token_latency_seconds"'),
    ("metric gpu_cache_usage_perc (older name)", "v1/metrics/loggers.py", None, r'"vllm:gpu_cache_usage_perc"'),
    ("log: engine starting", "v1/engine/core.py", 140, r"Initializing a V1 LLM engine"),
    ("log: weights loaded", "v1/worker/gpu_model_runner.py", 5089, r"Model loading took %\S+ GiB"),
    ("log: available KV memory", "v1/worker/gpu_worker.py", 773, r"Available KV cache memory"),
    ("log: KV cache size", "v1/core/kv_cache_utils.py", 1148, r"KV cache size: %s tokens"),
    ("log: serving", "entrypoints/launchers/api_server/entry.py", 139, r"Starting vLLM (?:API )?server"),
    ("debug dump path: fx graphs, not tensors", "envs.py", 786, r"# Dump fx graphs to the given directory"),
    # core/rules/vllm_facts.py TENSOR_DUMP: none through 0.34.0; "present" here means a release added one
    ("per-layer tensor dump (none: TENSOR_DUMP)", "debug/tensor_dump.py", None, r"class TensorDumper|TENSOR_DUMP_OUTPUT"),
]


class Source:
    """The .py files of one vLLM wheel (a .whl or an unpacked folder), read without importing them."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._zip = zipfile.ZipFile(path) if path.is_file() else None
        self._cache: dict[str, list[str] | None] = {}

    def lines(self, rel: str) -> list[str] | None:
        if rel not in self._cache:
            name = f"vllm/{rel}"
            try:
                text = self._zip.read(name).decode("utf-8") if self._zip else (self.path / name).read_text("utf-8")
                self._cache[rel] = text.splitlines()
            except (KeyError, FileNotFoundError):
                self._cache[rel] = None
        return self._cache[rel]

    def find(self, regex: str) -> str:
        """Where a fact is in this release when its file moved: every file is searched."""
        names = self._zip.namelist() if self._zip else [str(p.relative_to(self.path)) for p in self.path.rglob("*.py")]
        pattern = re.compile(regex)
        for name in names:
            if not name.endswith(".py") or not name.startswith("vllm/"):
                continue
            rel = name[len("vllm/"):]
            for i, line in enumerate(self.lines(rel) or (), 1):
                if pattern.search(line):
                    return f"{rel}:{i}"
        return "absent"


def download(version: str, folder: Path) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", f"vllm=={version}", "-d", str(folder)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    wheels = sorted(folder.glob(f"vllm-{version}-*.whl"))
    if done.returncode or not wheels:
        raise SystemExit(f"could not download vllm=={version} from the package index:\n{done.stderr.strip()}")
    return wheels[0]


def _value(source: Source, where: str, regex: str) -> str | None:
    """The value a fact's regex captures at `where` (`(?P<v>...)`), for a release-by-release table."""
    rel, _, line = where.rpartition(":")
    m = re.search(regex, (source.lines(rel) or [""])[int(line) - 1]) if line.isdigit() else None
    return m["v"] if m and "v" in m.groupdict() else None


def check(source: Source, find: bool) -> int:
    """ok: at the cited line; LINE: elsewhere in this release; VALUE: another value; ABSENT: not in it."""
    bad = 0
    for what, rel, line, regex, *expect in PROBES:
        lines = source.lines(rel)
        pattern = re.compile(regex)
        if line is not None and lines is not None and line <= len(lines) and pattern.search(lines[line - 1]):
            mark, where = "ok", f"{rel}:{line}"
        else:
            here = next((f"{rel}:{i}" for i, text in enumerate(lines or (), 1) if pattern.search(text)), None)
            if here is None and find:
                here = source.find(regex)
            found = here not in (None, "absent")
            mark = ("present" if found else "absent") if line is None else ("LINE" if found else "ABSENT")
            where = here or "absent"
        value = _value(source, where, regex)
        if expect and value is not None and value != expect[0] and mark in ("ok", "LINE"):
            mark = "VALUE"  # there, but not the value core/ uses
        bad += mark in ("LINE", "ABSENT", "VALUE")
        cited = f"   (cited: {rel}:{line}" + (f" = {expect[0]}" if expect else "") + ")" if mark in (
            "LINE", "ABSENT", "VALUE") else ""
        print(f"{mark:8} {what:45} {where}{'' if value is None else ' = ' + value}{cited}")
    return bad


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("version", nargs="?", help="a vLLM release, e.g. 0.33.0")
    parser.add_argument("--wheel", type=Path, help="a vllm .whl or an unpacked wheel folder instead of downloading")
    parser.add_argument("--find", action="store_true", help="search every file for a fact not at its cited place")
    args = parser.parse_args(argv)
    if args.wheel is None and not args.version:
        parser.error("give a version or --wheel")
    with tempfile.TemporaryDirectory() as tmp:
        wheel = args.wheel or download(args.version, Path(tmp))
        bad = check(Source(wheel), args.find)
    print(f"\n{bad} fact(s) not where core/ cites them" if bad else "\nevery fact is where core/ cites it")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
