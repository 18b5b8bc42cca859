"""General failure classes, read from the structure of the failing line rather than a list of texts.

Each rule looks at what the failure is (its exception type, assert expression, the numbers and
names in it, the stage, the layers it names) and says why it fits, with a confidence. Several may
fit; they are ranked. None fitting is still an answer: the failure stays, with low confidence.

Classes (the issue's vocabulary): layer_lookup (a layer or module asked of a container that holds
others), weights_mismatch (a checkpoint tensor with no place in the model, or missing), shape
(sizes disagree), divisibility, memory, device_coverage (no kernel/op/backend for this device or
dtype), feature_combination (two features that do not go together), device_fault (the driver or
collective library failed), fatal_signal, version_mismatch (packages from different releases).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .failure import Failure
from .layer_refs import LayerRef

CLASSES = ("layer_lookup", "weights_mismatch", "shape", "divisibility", "memory", "device_coverage",
           "feature_combination", "device_fault", "fatal_signal", "version_mismatch")
TITLES = {
    "layer_lookup": "A layer was asked of a container that holds other layers",
    "weights_mismatch": "A checkpoint tensor has no place in the model (or is missing)",
    "shape": "Sizes disagree",
    "divisibility": "A size does not divide evenly",
    "memory": "Not enough memory",
    "device_coverage": "No kernel, op or backend for this device or dtype",
    "feature_combination": "Two features that do not go together",
    "device_fault": "The device driver or collective library failed",
    "fatal_signal": "The process died on a signal",
    "version_mismatch": "Packages from different releases",
}

_PARAM_SUFFIX = re.compile(r"(?:weight|bias|scale|_scale|absmax|qweight|qzeros|scales|g_idx|_weight|inv_freq|A_log|D|dt_bias)'?$")
_NUM = r"(\d[\d,]*(?:\.\d+)?)"
_MEM_WORDS = re.compile(r"out of memory|OutOfMemory|OUT_OF_DEVICE_MEMORY|OUT_OF_HOST_MEMORY|larger than the available|"
                        r"exceeds available|not enough (?:\w+ )?memory|Tried to allocate|insufficient memory|"
                        r"No available memory|cannot allocate memory|failed to allocate", re.IGNORECASE)
_COVERAGE = re.compile(r"Could not run '(?P<op>[^']+)' with arguments from the '(?P<backend>[^']+)' backend|"
                       r"invalid device function|no kernel image is available|not (?:yet )?(?:supported|implemented) "
                       r"(?:on|for) (?:the )?(?:device|platform|backend|\w+ (?:GPU|device))|out of resource: (?P<res>[\w ]+)|"
                       r"only available for these backends|not compiled with|unsupported (?:dtype|device|data type)|"
                       r"cur_backend_id != -1|No available (?:kernel|backend)|does not support (?:the )?(?:device|dtype|bf16|"
                       r"bfloat16|fp8)|is not supported on (?:this|the current)", re.IGNORECASE)
_DIVIDE = re.compile(r"divisible|must be a multiple of|%[^=%]{1,80}== *0|is not a multiple", re.IGNORECASE)
_SHAPE = re.compile(r"size mismatch|shape mismatch|mat1 and mat2 shapes|must match the size of tensor|"
                    r"is invalid for input of size|shape '\[|expected .*shape|ne\[\d\]|ne0|ne1|nelements|ggml_nbytes|"
                    r"\bK >= 1\b|dimension|n_dims|view_src", re.IGNORECASE)
_FEATURE = re.compile(r"does not support (?!the device)|not supported (?:with|together|when|in combination)|cannot be used "
                      r"(?:with|together)|is not compatible with|Disable one of|incompatible with|requires .* to be "
                      r"(?:disabled|enabled)|only supported (?:with|without)|not (?:yet )?supported for .* with", re.IGNORECASE)
_DRIVER = re.compile(r"level_zero backend failed|UR_RESULT_ERROR|DEVICE_LOST|oneCCL|\bXCCL\b|NCCL error|ncclUnhandled|"
                     r"CUDA error: (?!out of memory)|HIP error: (?!invalid device function)|PI_ERROR|sycl::exception|"
                     r"hipError|ZE_RESULT_ERROR|aclrt\w+ failed|error code is \d+", re.IGNORECASE)
_SIGNALS = re.compile(r"SIGSEGV|SIGABRT|SIGBUS|SIGILL|SIGKILL|Segmentation fault|core dumped|died unexpectedly|"
                      r"Fatal Python error|EngineCore: -\d+|Aborted", re.IGNORECASE)
_VERSION = re.compile(r"takes \d+ positional arguments? but \d+ (?:were|was) given|got an unexpected keyword argument|"
                      r"has no attribute|cannot import name|undefined symbol|No module named|missing \d+ required "
                      r"positional argument", re.IGNORECASE)
_LOOKUP_EXC = ("KeyError", "IndexError", "ValueError", "AttributeError", "LookupError", "RuntimeError")


@dataclass
class ClassGuess:
    name: str
    confidence: float  # 0..1
    reasons: list[str] = field(default_factory=list)

    @property
    def title(self) -> str:
        return TITLES[self.name]


def _numbers(text: str) -> list[str]:
    return re.findall(_NUM, text)


def guess_classes(failure: Failure | None, refs: list[LayerRef], stage: str | None, context: str = "") -> list[ClassGuess]:
    """The classes this failure fits, most likely first, each with its reasoning."""
    if failure is None:
        return []
    text = f"{failure.exception}: {failure.message}" if failure.exception else failure.text
    chain = " ".join(failure.chain)
    whole = f"{text} {chain}"
    exc = failure.exception.rsplit(".", 1)[-1]
    guesses: list[ClassGuess] = []

    def add(name: str, confidence: float, *reasons: str) -> None:
        for g in guesses:
            if g.name == name:
                g.confidence = max(g.confidence, confidence)
                g.reasons.extend(r for r in reasons if r not in g.reasons)
                return
        guesses.append(ClassGuess(name, confidence, list(reasons)))

    named = [r for r in refs if r.line == failure.line]
    path = next((r for r in named if r.scheme in ("module_path", "blk")), None)
    frames = " ".join(f.func for f in failure.frames)

    m = _MEM_WORDS.search(whole)
    if m:
        nums = _numbers(failure.message or failure.text)
        add("memory", 0.9, f"the failure says \u201c{m.group(0)}\u201d" + (f" with the figures {', '.join(nums[:4])}" if nums else ""))
    m = _COVERAGE.search(whole)
    if m:
        if m.groupdict().get("op"):
            add("device_coverage", 0.9, f"the op {m['op']} has no kernel for the {m['backend']} backend (the message lists "
                                        "the backends that do have one)")
        elif m.groupdict().get("res"):
            add("device_coverage", 0.75, f"a kernel's launch configuration needs more {m['res'].strip()} than this device "
                                         "has: the kernel has no configuration for it")
        else:
            add("device_coverage", 0.8, f"the failure says \u201c{m.group(0)}\u201d: the code has no entry for this device")
    m = _DIVIDE.search(whole)
    if m:
        nums = _numbers(whole)
        add("divisibility", 0.9, f"the failure is a divisibility check (\u201c{m.group(0).strip()}\u201d)"
                                 + (f" over {', '.join(nums[:4])}" if nums else ""))
    if failure.exception == "KeyError" or (failure.exception == "GGML_ASSERT" and False):
        pass
    if path is not None or "missing tensor" in whole:
        key = path.text if path else ""
        param = bool(path and _PARAM_SUFFIX.search(path.module or "")) or "missing tensor" in whole
        loading = stage == "model_load" or "load_weights" in frames or "missing tensor" in whole
        if param and (loading or exc == "KeyError") and "shape" not in whole:
            where = f" (layer {path.layer}, {path.module})" if path and path.layer is not None else ""
            add("weights_mismatch", 0.85, f"the name looked up is a parameter{where}: the checkpoint and the model built "
                                          "from the config disagree on the tensor names at this layer")
        elif exc in _LOOKUP_EXC or failure.exception == "KeyError":
            add("layer_lookup", 0.85, f"{exc or 'the lookup'} on {key}: a container keyed by layer (attention layers, "
                                      "KV cache groups, a PP rank's layers) does not hold this one")
    if exc in ("ValueError", "KeyError", "IndexError", "AssertionError", "RuntimeError") and not path:
        ids = [r for r in named if r.scheme in ("layer_id", "layer", "layer[]", "pool_index", "il")]
        valid = [r for r in named if r.scheme == "valid_list"]
        if ids and (valid or re.search(r"not in|not found|out of range|does not hold|no such", whole, re.IGNORECASE)):
            add("layer_lookup", 0.9, f"layer {ids[0].layer} was asked for" + (f" and the container holds {len(valid)} "
                                     "other layers" if valid else "") + " (the PR #32227 form)")
        elif exc == "IndexError" and ("get_value_buffer" in frames or "get_key_buffer" in frames):
            add("layer_lookup", 0.8, "an index into a pool's per-layer list is out of range: the pool holds fewer layers "
                                     "than the index assumes (a PP stage or a pool of one kind)")
    if re.search(r"No (?:\w+ )?attribute in layer|no (?:attention|mamba) layers|is not an? \w+ layer", whole, re.IGNORECASE):
        add("layer_lookup", 0.6, "the code expected a kind of layer the model's layer does not have (a hybrid's layer "
                                 "0 may be linear attention or Mamba)")
    m = _SHAPE.search(whole)
    if m and not any(g.name == "divisibility" for g in guesses):
        shapes = re.findall(r"(?:torch\.Size\(\[[\d, ]*\]\)|\[[\d, ]+\])", whole)
        add("shape", 0.8 if failure.kind != "assert" else 0.6, f"the failure compares sizes (\u201c{m.group(0)}\u201d)"
            + (f": {shapes[0]} against {shapes[1]}" if len(shapes) >= 2 else ""))
    m = _FEATURE.search(whole)
    if m:
        add("feature_combination", 0.7, f"the failure says \u201c{m.group(0).strip()}\u201d: one feature turns another off")
    m = _DRIVER.search(whole) or _DRIVER.search(context)
    if m:
        add("device_fault", 0.7, f"the device runtime or the collective library reported \u201c{m.group(0).strip()}\u201d")
    if failure.kind == "signal" or (_SIGNALS.search(whole) and failure.kind not in ("exception", "assert")):
        add("fatal_signal", 0.8, f"the process ended on a signal (\u201c{failure.exception or failure.text[:60]}\u201d): "
                                 "no Python exception explains it; the native frames above it do")
    m = _VERSION.search(whole)
    if m:
        add("version_mismatch", 0.6, f"\u201c{m.group(0)}\u201d: the caller and the callee come from different "
                                     "releases of their packages")
    guesses.sort(key=lambda g: -g.confidence)
    return guesses
