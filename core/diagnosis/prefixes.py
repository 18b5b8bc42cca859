"""Log prefixes that stand between a line and what the engine said, removed before matching.

vLLM writes every line of a child process as `(EngineCore_DP0 pid=4410) ERROR 09-10 18:22:20
[core.py:708] <text>` (also `(Worker_TP0 pid=..)`, `(VllmWorker rank=1 pid=..)`, `(APIServer pid=..)`,
and Ray's `(RayWorkerWrapper pid=.., ip=..)`); older releases drop the `[` before the file name.
The line count is kept, so line numbers still point into the original log.
"""

from __future__ import annotations

import re

# (Process_name key=value, key=value) -- the process tag vLLM's multiprocessing adds.
_PROCESS = r"\((?:[A-Za-z_][\w\-]*)(?: (?:pid|rank|ip|local_rank|node)=[^)]*)?\)[ \t]+"
# LEVEL MM-DD HH:MM:SS[.fff] [file.py:123] -- vLLM's logger format.
_LOGGER = r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?[\w.\-]+:\d+\] ?"
_PREFIX = re.compile(rf"^(?:{_PROCESS})?{_LOGGER}|^{_PROCESS}")


def strip_prefix(line: str) -> str:
    """The line without vLLM's process tag and logger header (unchanged when it has neither)."""
    return _PREFIX.sub("", line, count=1)


def is_vllm_log(lines: list[str]) -> bool:
    """Whether the log carries vLLM's logger headers (its facts and advice then speak vLLM)."""
    return any(_PREFIX.match(line) for line in lines[:2000])


# `vllm-ascend  | (EngineCore_DP0 ...` (docker compose), `[rank0]: ...` (torchrun), `[Stage-0] ERROR ...`.
_OUTER = re.compile(r"^(?:[\w.\-]+\s+\|\s+|\[rank\d+\]:\s?|\[Stage-\d+\]\s+)")


def strip_all(line: str) -> str:
    """The line without any framing the reader knows: compose/torchrun tags, then vLLM's process and logger headers."""
    return strip_prefix(_OUTER.sub("", line, count=1))
