"""A log read as a whole: which engine, what failed, where in start-up, which layers, and why.

This is the general reader under the catalogue: it knows no exact texts, only the structure of
logs (tracebacks, asserts, signals, engine framing, layer names), so an unknown failure is still a
ranked diagnosis. The catalogue's findings sit on top where it knows the exact fix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from bringup.core.layermap.vocabulary import LayerMap

from .classes import ClassGuess, guess_classes
from .failure import Failure, Frame, find_failures, frame_code, primary
from .layer_map_words import LayerWords, describe_refs
from .layer_refs import LayerRef, distinct_layers, refs_in_line
from .stages import LABELS, STAGES, failure_stage, progress

CONTEXT_ABOVE = 40  # lines above a failure whose layer names belong to it


@dataclass
class Reading:
    engine: str  # sglang | vllm | llama.cpp | transformers | torch | triton | "" (unknown)
    failure: Failure | None
    failures: list[Failure]
    classes: list[ClassGuess]
    stage: str | None  # where it died
    stage_why: str
    reached: list[tuple[str, int]]  # (stage, line) of each start-up stage the log shows
    refs: list[LayerRef]  # layer references tied to the failure
    layers: list[LayerWords] = field(default_factory=list)  # what each named layer is on the map
    absurd: list[LayerRef] = field(default_factory=list)
    run: dict = field(default_factory=dict)  # engine version, device, model, tp/pp, rank, flags

    @property
    def failed(self) -> bool:
        return self.failure is not None

    @property
    def named_layers(self) -> tuple[int, ...]:
        return distinct_layers(self.refs)

    @property
    def engine_frame(self) -> Frame | None:
        """The innermost traceback frame in an engine's own code."""
        if self.failure is None:
            return None
        for frame in reversed(self.failure.frames):
            if frame.engine in ("sglang", "vllm", "vllm_ascend", "bringup", "transformers"):
                return frame
        return None

    def to_json(self) -> dict:
        f = self.failure
        return {
            "engine": self.engine, "failed": self.failed,
            "failure": None if f is None else {"kind": f.kind, "line": f.line, "text": f.text, "exception": f.exception,
                                               "message": f.message, "chain": f.chain,
                                               "frames": [fr.__dict__ for fr in f.frames[-12:]]},
            "classes": [{"class": g.name, "title": g.title, "confidence": round(g.confidence, 2), "reasons": g.reasons}
                        for g in self.classes],
            "stage": self.stage, "stage_why": self.stage_why,
            "reached": [{"stage": s, "line": n} for s, n in self.reached],
            "layers": [w.to_json() for w in self.layers] or [{"layer": n} for n in self.named_layers],
            "absurd_layer_ids": [{"line": r.line, "digits": len(r.digits)} for r in self.absurd],
            "run": self.run,
        }


_ENGINE_MARKS = (
    ("llama.cpp", re.compile(r"GGML_ASSERT|llama_model_load|llama_model_loader|print_info:|llm_load_|ggml_|llama-server|"
                             r"llama-cli|build_info:|llama_context")),
    ("sglang", re.compile(r"sglang|Scheduler hit an exception|server_args=ServerArgs|\[\d{4}-\d\d-\d\d [\d:]+(?: TP\d+)?\]")),
    ("vllm", re.compile(r"vllm|EngineCore|\((?:APIServer|Worker_\w+|RayWorkerWrapper|VllmWorker)[^)]*\)")),
    ("transformers", re.compile(r"transformers|from_pretrained|size mismatch for")),
    ("triton", re.compile(r"triton\.")),
    ("torch", re.compile(r"torch|level_zero|UR_RESULT|NotImplementedError: Could not run")),
)


def detect_engine(lines: list[str], failure: Failure | None) -> str:
    """Whose log this is: an engine's frames in the failure's traceback first, then its framing."""
    if failure is not None:
        for frame in reversed(failure.frames):
            if frame.engine in ("sglang", "vllm", "vllm_ascend"):
                return "vllm" if frame.engine.startswith("vllm") else frame.engine
    head = "\n".join(lines[:300] + lines[-300:])
    for name, regex in _ENGINE_MARKS:
        if regex.search(head):
            return name
    return ""


_RUN_FACTS = (
    ("version", re.compile(r"vLLM API server version (\S+)|LLM engine \(v([\w.+]+)\)|sglang(?:==| version:? ?v?)(\d+\.\d+\.\d+\S*)|"
                           r"^version: (\d+ \(\w+\))|build(?:_info)?: ?(\S+ ?\(?\w*\)?)|lmsysorg/sglang:v([\w.]+)", re.I)),
    ("device", re.compile(r"device='?(\w+)|--device[ =](\w+)|device_config=(\w+)|using device (\w+)|"
                          r"Automatically detected platform (\w+)|Platform plugin (\w+) is activated")),
    ("model", re.compile(r"model_path='([^']+)'|--model(?:-path)?[ =](\S+)|'model': '([^']+)'|model='([^']+)'|"
                         r"vllm serve (\S+)|-m (\S+\.gguf)|loading model '([^']+)'|Loading MLX model: (\S+)")),
    ("tp", re.compile(r"tp_size=(\d+)|--tensor-parallel-size[ =](\d+)|--tp(?:-size)?[ =](\d+)|-tp (\d+)|"
                      r"tensor_parallel_size[=':\s]+(\d+)")),
    ("pp", re.compile(r"pp_size=(\d+)|--pipeline-parallel-size[ =](\d+)|--pp(?:-size)?[ =](\d+)|"
                      r"pipeline_parallel_size[=':\s]+(\d+)")),
    ("rank", re.compile(r"\b(TP\d+|PP\d+|Worker_TP\d+|Worker_PP\d+|rank\d+|RankID:\d+)\b")),
    ("attention_backend", re.compile(r"attention_backend='(\w+)'|--attention-backend[ =](\w+)|VLLM_ATTENTION_BACKEND=(\w+)|"
                                     r"Using (\w+) attention backend|Using (\w+) backend")),
    ("speculative", re.compile(r"--speculative-(?:algorithm|algo)[ =](\w+)|\"method\":\s*\"(\w+)\"|--spec-type (\w+)")),
    ("prefix_caching", re.compile(r"(--enable-prefix-caching|--no-enable-prefix-caching|--disable-radix-cache)")),
    ("quantization", re.compile(r"quantization='?(\w+)|--quantization[ =](\w+)|--load-in-low-bit (\w+)|--torchao-config (\w+)")),
    ("dtype", re.compile(r"--dtype[ =](\w+)|'dtype': '(\w+)'|dtype=torch\.(\w+)")),
)


def read_run(lines: list[str]) -> dict:
    """What the log says about the run: engine version, device, model, TP/PP, rank, backend and flags."""
    head = lines[:1000] + lines[-300:] if len(lines) > 1300 else lines  # the launch is at the top
    text = "\n".join(head)
    run: dict = {}
    for key, regex in _RUN_FACTS:
        m = regex.search(text)
        if m:
            value = next((g for g in m.groups() if g), None)
            if value:
                run[key] = value.strip()
    if "device" not in run:
        low = text
        for word, device in (("xpu", "xpu"), ("level_zero", "xpu"), ("ROCm", "rocm"), ("HIP error", "rocm"),
                             ("NPU", "npu"), ("Ascend", "npu"), ("Metal", "mps"), ("MLX", "mps"), ("CUDA", "cuda")):
            if word in low:
                run["device"] = device
                break
    return run


def _block_refs(lines: list[str], failure: Failure) -> list[LayerRef]:
    """Layer names in the failing line, its chain and traceback (frames skipped), and the lines just above."""
    start = min([failure.line - 1 - CONTEXT_ABOVE] + [fr.log_line - 1 for fr in failure.frames[:1]])
    start = max(0, start)
    own = refs_in_line(lines[failure.line - 1], failure.line)
    around: list[LayerRef] = []
    for i in range(start, failure.line - 1):
        around.extend(refs_in_line(lines[i], i + 1))
    return own + [r for r in around if r.scheme != "valid_list" or not own]


def read_log_lines(lines: list[str], layer_map: LayerMap | None = None, index=None) -> Reading:
    from .line_index import LineIndex

    index = index or LineIndex(lines)
    failures = find_failures(lines, index)
    fail = primary(failures)
    engine = detect_engine(lines, fail)
    run = read_run(lines)
    if fail is None:
        return Reading(engine, None, failures, [], None, "", progress(lines, index=index), [], run=run)
    reached = progress(lines, fail.line, index)
    frames_text = [f"{fr.func} {frame_code(lines, fr)} ({fr.relative}:{fr.line})" for fr in fail.frames]
    context = "\n".join(lines[max(0, fail.line - 6):fail.line - 1])
    stage, why = failure_stage(frames_text, f"{fail.text} {' '.join(fail.chain)}", reached, context)
    refs = _block_refs(lines, fail)
    absurd = [r for r in refs if r.absurd]
    refs = [r for r in refs if not r.absurd]
    classes = guess_classes(fail, refs, stage, context)
    reading = Reading(engine, fail, failures, classes, stage, why, reached, refs, absurd=absurd, run=run)
    if layer_map is not None:
        reading.layers = describe_refs(refs, layer_map, pp=int(run.get("pp") or 1))
    return reading


def stage_label(stage: str | None) -> str:
    return LABELS.get(stage or "", "unknown")


__all__ = ["Reading", "read_log_lines", "STAGES", "stage_label"]
