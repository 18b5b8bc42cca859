"""The CPU's compiled decode step saved whole, so that a second start of the same model skips dynamo.

Inductor's on-disk cache spares a later start the C++ compiles, but not dynamo's trace of the
step: on the default model (52 blocks, about 2,200 ops) the trace and the cache look-ups were
21 s of a 28 s warm start on the 2-core build box. torch 2.13's ahead-of-time compile
(`torch.compile(...)._aot_compile`, experimental) returns the traced graph, its guards and
inductor's code as one serialisable object; loaded, it runs the step with no trace at all.

The file is found by a key over what the trace depended on: torch and Python, bringup's own
sources, the model's modules and every tensor's name, shape, dtype and layout, the pools' tensors,
the CPU's vector ISA and thread count, the oneDNN packing switch and the BRINGUP_/TORCH env vars.
The globals a trace reads (module switches) are what torch leaves out of the saved guards, hence
the sources and switches in the key; the tensor guards torch keeps are still checked on each call.
Anything that fails to save or load leaves the usual compile (cpu_compiled_decode.py).
"""

from __future__ import annotations

import hashlib
import os
import platform
import sys
from pathlib import Path

import torch

FORMAT = 1  # bump when what the key covers changes
_PACKAGE_DIRS = ("core", "kernels")  # bringup's folders whose code a decode step may trace


def available() -> bool:
    """Whether this torch saves compiled functions (2.13's experimental AOT compile)."""
    return hasattr(torch._dynamo, "aot_compile") and bool(getattr(torch._dynamo.config, "enable_aot_compile", False))


def use_bringup_inductor_cache() -> str:
    """Inductor's on-disk cache under `~/.cache/bringup/inductor` ($XDG_CACHE_HOME respected), unless
    $TORCHINDUCTOR_CACHE_DIR names one: torch's default, /tmp/torchinductor_<user>, is a shared path
    that another user can create first (and that a reboot clears). Inductor reads the variable when it
    compiles, so setting it here, before torch.compile, is enough."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(base / "bringup" / "inductor"))


def steps_dir(inductor_cache: str) -> Path:
    """Inside inductor's cache: clearing that cache clears these too."""
    return Path(inductor_cache) / "bringup_decode_steps"


def _sources_digest() -> str:
    root = Path(__file__).resolve().parents[2]
    h = hashlib.sha256()
    for folder in _PACKAGE_DIRS:
        for path in sorted((root / folder).rglob("*.py")):
            h.update(str(path.relative_to(root)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()


def _tensors(named) -> list[str]:
    return [f"{name}:{type(t).__name__}:{tuple(t.shape)}:{tuple(t.stride())}:{t.dtype}:{t.device}"
            for name, t in named]


def step_key(model: torch.nn.Module, kv_pool, state_pool) -> str:
    """What a saved step must match to be loaded (the module docstring lists it)."""
    from bringup.kernels.cpu import onednn_packed

    parts = [f"format {FORMAT}", torch.__version__, sys.version, platform.machine(),
             torch.backends.cpu.get_cpu_capability(), f"threads {torch.get_num_threads()}",
             f"onednn packed {onednn_packed.ENABLED}", _sources_digest(), repr(model)]
    parts += _tensors(model.named_parameters())
    parts += _tensors(model.named_buffers())
    for pool in (kv_pool, state_pool):
        for attr in ("_k", "_v", "_conv", "_ssm"):
            parts += _tensors((f"{attr}{i}", t) for i, t in enumerate(getattr(pool, attr, None) or ()))
    parts += sorted(f"{k}={v}" for k, v in os.environ.items()
                    if k.startswith(("BRINGUP_", "TORCH")) and k != "TORCHINDUCTOR_CACHE_DIR")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


def compile_and_save(model: torch.nn.Module, batch, path: Path) -> tuple["SavedStep", str | None]:
    """AOT-compile `model`'s forward on `batch` (its dynamic dimensions marked) and write it to `path`
    atomically (a reader never sees half a file). Returns the step and, if saving failed, why (the
    step still runs; the next start compiles again)."""
    from torch._dynamo.aot_compile import ModelInput

    module = torch.compile(model, fullgraph=True)
    module._aot_compile([ModelInput(args=(batch,), kwargs={}, contexts=[torch.inference_mode()])])
    step = SavedStep(module.forward)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        module._save_aot_compiled_module(str(tmp))
        os.replace(tmp, path)
    except Exception as err:  # noqa: BLE001 - an unsaveable step still runs
        return step, f"{type(err).__name__}: {(str(err).strip().splitlines() or [''])[0][:200]}"
    finally:
        tmp.unlink(missing_ok=True)
    return step, None


def load(model: torch.nn.Module, path: Path) -> "SavedStep | None":
    """The step saved at `path` for `model`, or None where there is none."""
    if not path.is_file():
        return None
    module = torch.compile(model, fullgraph=True)
    module._load_aot_compiled_module(path.read_bytes())
    return SavedStep(module.forward)


class SavedStep:
    """Runs an AOT-compiled step when its guards pass; `None` from `try_run` when they do not (the
    caller then takes the usual compiled path, which traces afresh)."""

    def __init__(self, aot_model):
        self._model = aot_model.model
        self._results = aot_model.compiled_results
        for result in self._results:
            result.disable_guard_check()  # checked once here, not again inside the call

    def try_run(self, batch):
        for result in self._results:
            if result.guard_check(self._model, batch):
                return result(self._model, batch)
        return None
