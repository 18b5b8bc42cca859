"""Where a log fails: the last exception (with the chain above it), an assert, a `Check failed`, a
fatal signal, an engine's own error line, a traceback cut off before its exception, a non-zero exit.

Read in one pass over the lines. Every candidate keeps its kind and line; the failure of the log
is the most specific one (an exception or assert beats the wrapper that reports it, "see root cause
above"), and among equals the last, since engines re-raise the cause at the end.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .wrappers import SEE_ABOVE

# A Python exception line: `KeyError: 'x'`, `torch.OutOfMemoryError: CUDA out of memory...`,
# `triton.runtime.errors.OutOfResources: ...`, pydantic's `Value error, ...`.
_EXC = re.compile(
    r"^(?:E\s+)?(?P<exc>(?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure|Warning|OutOfResources)"
    r"|KeyboardInterrupt|StopIteration|OutOfResources))(?::\s*(?P<msg>.*))?$"
)
_VALUE_ERROR = re.compile(r"^(?P<exc>Value error|Assertion failed), (?P<msg>.+)$")
_GGML = re.compile(r"GGML_ASSERT(?:\((?P<a>.*)\)(?: failed)?\s*$|:\s*(?P<where>\S+:\d+):\s*(?P<b>.+))")
_ASSERTION = re.compile(r"Assertion [`'](?P<a>.+?)['`] failed")
_CHECK = re.compile(r"\bCheck failed: (?P<a>.+)")
_SIGNAL = re.compile(
    r"Fatal Python error: (?P<s>[\w ]+)|\*\*\* (?P<s2>SIG\w+) received|\b(?P<s3>Segmentation fault|Bus error|Illegal instruction)"
    r"(?: \(core dumped\))?|^(?P<s4>Aborted)(?: \(core dumped\))?$|(?P<s5>core dumped)|died unexpectedly|EngineCore: -\d+|"
    r"exitcode\s*[:=]\s*-(?P<sig>\d+)"
)
_ENGINE_ERROR = re.compile(
    r"(?P<m>error loading model(?: architecture)?: .+|failed to load model.*|"
    r"(?:NPU|CUDA|GPU|XPU|HIP) out of memory\..*|out of memory|"
    r"\bis larger than the available\b|\bexceeds available\b|"
    r"level_zero backend failed with error.*|UR_RESULT_ERROR_\w+.*|"
    r"\[XCCL\].*check failed|CUresult error.*|oneCCL: .*EXCEPTION.*|"
    r"size mismatch for \S+: copying a param with shape.*)",
    re.IGNORECASE,
)
_EXIT = re.compile(r"(?:exited|exit(?:ed)? with|returned non-zero exit status|exit code|exitcode)\D{0,12}(?P<code>-?\d+)",
                   re.IGNORECASE)
_TRACEBACK = "Traceback (most recent call last)"
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in | in )(?P<func>[^\s(]+)')
_BARE_KEY = re.compile(r"^(?:ERROR\b.*?\]\s*)?'(?P<key>[\w.]+\.\d+\.[\w.]+)'$")
# Rank of each kind: how much it says about the cause.
KIND_RANK = {"exception": 5, "assert": 5, "engine_error": 4, "signal": 3, "traceback_cut": 2, "exit": 1, "wrapper": 0}


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    func: str
    log_line: int  # where the frame stands in the log (1-based)

    @property
    def engine(self) -> str:
        """Whose code this frame is: the package under site-packages (or a source tree) it sits in."""
        for name in ("sglang", "vllm_ascend", "vllm", "transformers", "torch", "triton", "fla", "bringup", "mamba_ssm",
                     "flashinfer", "sgl_kernel", "ipex_llm"):
            if f"/{name}/" in self.file.replace("\\", "/"):
                return name
        return ""

    @property
    def relative(self) -> str:
        """The file from its package root (`vllm/v1/worker/gpu_model_runner.py`)."""
        path = self.file.replace("\\", "/")
        engine = self.engine
        if engine and f"/{engine}/" in path:
            return engine + "/" + path.rsplit(f"/{engine}/", 1)[1]
        return path


@dataclass
class Failure:
    kind: str  # exception | assert | engine_error | signal | traceback_cut | exit | wrapper
    line: int  # 1-based
    text: str  # the failing line, stripped
    exception: str = ""  # KeyError, torch.OutOfMemoryError, GGML_ASSERT, SIGSEGV ...
    message: str = ""  # what the exception or assert says
    frames: list[Frame] = field(default_factory=list)  # the traceback above it, outermost first
    chain: list[str] = field(default_factory=list)  # earlier exceptions this one was raised from

    @property
    def rank(self) -> int:
        return KIND_RANK[self.kind]


_INSIDE = re.compile(r"(?:^|[\s\]|>)])(?=(?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*?(?:Error|Exception)|OutOfResources):\s)")
_CHATTER = re.compile(r"\b(?:INFO|DEBUG|WARNING|WARN)\b")


def _exception_inside(s: str) -> re.Match | None:
    """An exception line behind framing the prefix stripper does not know (`RROR 12-18 ... engine.py:366] ValueError: ..`,
    `[16:10:33] stdout/INFO  triton....OutOfResources: ..`); chatter at INFO level that quotes an error is not one."""
    m = _INSIDE.search(s)
    if not m:
        return None
    head = s[:m.start() + 1]
    if _CHATTER.search(head) and "ERROR" not in head and "/INFO" not in head:
        return None
    return _EXC.match(s[m.end():].lstrip())


# A line that can state a failure holds one of these; most log lines hold none and skip the rest.
_MAYBE = re.compile(r"rror|xception|ssert|ASSERT|ailed|atal|SIG|ault|bort|emory|larger than|exceeds|died|xit|dumped|"
                    r"Check|Interrupt|OutOfResources|UR_RESULT|CCL|mismatch|CUresult|^'|\] '")


def _classify_line(line: str) -> tuple[str, str, str] | None:
    """(kind, exception, message) when the line states a failure."""
    s = line.strip()
    if not s or not _MAYBE.search(s):
        return None
    m = _GGML.search(s)
    if m:
        return "assert", "GGML_ASSERT", (m["a"] or m["b"] or "").strip()
    m = _ASSERTION.search(s) or _CHECK.search(s)
    if m:
        return "assert", "Check failed" if "Check failed" in s else "assertion", m["a"].strip()
    m = _EXC.match(s) or _exception_inside(s)
    if m and not s.startswith(("File ", "Traceback")):
        exc = m["exc"]
        if exc.endswith("Warning"):
            return None
        kind = "wrapper" if SEE_ABOVE.search(s) else "exception"
        return kind, exc, (m["msg"] or "").strip()
    m = _VALUE_ERROR.match(s)
    if m:
        return "exception", "ValueError" if m["exc"] == "Value error" else "AssertionError", m["msg"].strip()
    m = _SIGNAL.search(s)
    if m:
        name = next((g for g in (m["s"], m["s2"], m["s3"], m["s4"], m["s5"]) if g), "") or (
            f"signal {m['sig']}" if m["sig"] else "process died")
        return "signal", name.strip(), s
    m = _BARE_KEY.match(s)
    if m:  # vLLM's engine prints a KeyError as its bare repr: 'layers.0.mlp.down_proj.weight.absmax'
        return "exception", "KeyError", f"'{m['key']}'"
    m = _ENGINE_ERROR.search(s)
    if m and not SEE_ABOVE.search(s):
        return "engine_error", "", s
    if SEE_ABOVE.search(s):
        return "wrapper", "", s
    m = _EXIT.search(s)
    if m and m["code"] not in ("0",) and ("exit" in s.lower()):
        return "exit", "exit", s
    return None


_NEEDLES = ("rror", "xception", "ssert", "ASSERT", "ailed", "atal", "SIG", "ault", "bort", "emory", "larger than",
            "exceeds", "died", "xit", "dumped", "Check", "Interrupt", "OutOfResources", "UR_RESULT", "CCL", "mismatch",
            "CUresult", "\n'", "] '", "Traceback", 'File "', "above exception")


def find_failures(lines: list[str], index=None) -> list[Failure]:
    """Every failure the log states, in order, each with the traceback frames just above it. Only
    the lines holding a failure word are looked at (found with str.find over the whole text)."""
    from .line_index import LineIndex

    index = index or LineIndex(lines)
    wanted = index.lines_with(_NEEDLES)
    if lines and lines[0].startswith("'"):
        wanted = sorted(set(wanted) | {0})
    out: list[Failure] = []
    frames: list[Frame] = []
    in_traceback = False
    chain: list[str] = []
    pending_cut: int | None = None
    for i in wanted:
        line = lines[i]
        if _TRACEBACK in line:
            if in_traceback and frames and pending_cut is not None:
                pass
            in_traceback, frames, pending_cut = True, [], i
            continue
        fm = _FRAME.match(line)
        if fm:
            frames.append(Frame(fm["file"], int(fm["line"]), fm["func"], i + 1))
            if pending_cut is None:
                pending_cut = i
            continue
        found = _classify_line(line)
        if found is None:
            if "The above exception was the direct cause" in line or "During handling of the above exception" in line:
                if out and out[-1].kind == "exception":
                    chain.append(f"{out[-1].exception}: {out[-1].message}"[:200])
            continue
        kind, exc, msg = found
        if kind == "engine_error" and out and out[-1].kind in ("exception", "assert") and out[-1].line == i:
            continue  # the engine echoing the exception line just above
        out.append(Failure(kind, i + 1, line.strip()[:2000], exc, msg[:2000], list(frames) if kind != "wrapper" else [],
                           list(chain) if kind == "exception" else []))
        if kind == "exception":
            in_traceback, frames, pending_cut = False, [], None
        elif kind == "signal":
            out[-1].frames.extend(_frames_below(lines, i + 1))
    if (in_traceback or frames) and pending_cut is not None and (not out or out[-1].line - 1 < pending_cut):
        last = frames[-1].log_line if frames else pending_cut + 1
        out.append(Failure("traceback_cut", last, lines[last - 1].strip()[:2000], "", "the traceback ends before its "
                           "exception (the log was cut)", list(frames)))
    return out


def _frames_below(lines: list[str], start: int, limit: int = 60) -> list[Frame]:
    """faulthandler's `Stack (most recent call first)`: frames printed under the signal, innermost first."""
    found = []
    for j in range(start, min(len(lines), start + limit)):
        fm = _FRAME.match(lines[j])
        if fm:
            found.append(Frame(fm["file"], int(fm["line"]), fm["func"], j + 1))
    return list(reversed(found))


def frame_code(lines: list[str], frame: Frame) -> str:
    """The source line the log prints under a frame (Python's traceback shows it)."""
    if frame.log_line < len(lines):
        nxt = lines[frame.log_line].strip()
        if nxt and not nxt.startswith(("File ", "^", "~")) and not _FRAME.match(lines[frame.log_line]):
            return nxt[:200]
    return ""


def primary(failures: list[Failure]) -> Failure | None:
    """The failure that explains the log: the most specific kind, the last one of that kind."""
    if not failures:
        return None
    best = max(f.rank for f in failures)
    return [f for f in failures if f.rank == best][-1]
