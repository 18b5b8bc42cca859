"""The device probe's child process: `python -m bringup.core.probe.child [--steps a,b] [--simulate crash:STEP]`.

It runs the probe steps in order and reports each on a private copy of stdout as JSON lines:
`{"event": "begin", "step": S}` before a step and `{"event": "end", "step": S, "verdict": ..., ...}`
after it. A step that kills the process (a segfault in `torch.xpu` on some Intel systems) or hangs
therefore leaves a `begin` without an `end`, and the parent (`core/probe/runner.py`) names that step,
restarts a fresh child for the steps left and carries on. Anything libraries print goes to stderr.

Steps come in two layers, libraries first (is it installed, does it import, how was it built) then
runtime (does the device answer, what does it have). Each step only reads; none allocates device
memory beyond what the runtime does on its own.

Verdicts: `ok`, `absent` (not installed / no such device: a fact, not a fault), `failed` (raised),
`skipped` (a step it needs did not succeed). The parent adds `crashed` and `timeout`.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import sys
import time
import traceback
from dataclasses import dataclass
from typing import Callable

SIMULATE_ENV = "BRINGUP_PROBE_SIMULATE"  # "crash:STEP,hang:STEP": for tests of the parent's recovery

# Python distributions whose version the probe reports (name as pip knows it).
PACKAGES = (
    "torch", "transformers", "sglang", "sgl-kernel", "sgl-kernel-xpu", "intel-extension-for-pytorch",
    "triton", "pytorch-triton-xpu", "pytorch-triton-rocm", "triton-xpu", "flash-linear-attention",
    "torch-npu", "safetensors", "tokenizers", "numpy", "psutil",
)
# Triton backend name -> the torch device it compiles for.
TRITON_BACKEND_DEVICES = {"nvidia": "cuda", "amd": "cuda", "intel": "xpu", "cpu": "cpu"}


@dataclass(frozen=True)
class Step:
    name: str
    layer: str  # "libraries" or "runtime"
    title: str
    needs: tuple[str, ...]
    run: Callable[[], tuple[str, dict, str]]  # -> (verdict, data, detail)


class Absent(Exception):
    """The thing probed is not there (not installed, no device): verdict `absent`."""


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _torch():
    import torch  # noqa: PLC0415  (imported in the child only, on purpose)

    return torch


# ---- libraries ---------------------------------------------------------------------------------

def step_python():
    data = {
        "version": platform.python_version(),
        "implementation": platform.python_implementation(),
        "executable": sys.executable,
        "platform": platform.platform(),
        "machine": platform.machine(),
    }
    return "ok", data, f"Python {data['version']} on {data['platform']}"


def step_packages():
    data = {name: _version(name) for name in PACKAGES}
    found = [f"{k} {v}" for k, v in data.items() if v]
    return "ok", data, ", ".join(found) or "none of the packages of interest is installed"


def step_torch():
    if _version("torch") is None:
        raise Absent("torch is not installed")
    torch = _torch()
    version = torch.version
    xpu = getattr(version, "xpu", None)
    data = {
        "version": torch.__version__,
        "cuda": version.cuda,
        "hip": getattr(version, "hip", None),
        "xpu": xpu,
        "debug": bool(version.debug),
        "git": getattr(version, "git_version", None),
        "has_xpu_module": hasattr(torch, "xpu"),
        "cpu_capability": _cpu_capability(torch),
    }
    if data["cuda"]:
        build = f"CUDA {data['cuda']}"
    elif data["hip"]:
        build = f"ROCm {data['hip']}"
    elif xpu:
        build = f"XPU {xpu}"
    else:
        build = "CPU only"
    data["build"] = build
    return "ok", data, f"torch {data['version']} ({build} build)"


def _cpu_capability(torch) -> str | None:
    try:
        return torch.backends.cpu.get_cpu_capability()
    except Exception:  # older torch
        return None


def step_ipex():
    version = _version("intel-extension-for-pytorch")
    if version is None:
        raise Absent("intel-extension-for-pytorch is not installed (upstream torch carries XPU support itself)")
    from bringup.core.probe.ipex_compat import ipex_mismatch

    mismatch = ipex_mismatch(version, _version("torch"))
    if mismatch:  # its own import error would only say "undefined symbol" or "needs torch 2.8"
        return "failed", {"version": version}, mismatch
    module = importlib.import_module("intel_extension_for_pytorch")
    loaded = getattr(module, "__version__", version)
    return "ok", {"version": loaded}, f"intel-extension-for-pytorch {loaded} imports"


def step_triton():
    try:
        triton = importlib.import_module("triton")
    except ModuleNotFoundError as err:
        raise Absent("Triton is not installed") from err
    names: list[str] = []
    try:
        from triton.backends import backends  # noqa: PLC0415

        names = sorted(backends)
    except Exception:  # a Triton too old to have plugin backends
        names = []
    devices = {dev: any(TRITON_BACKEND_DEVICES.get(n) == dev for n in names) for dev in ("cuda", "xpu", "cpu")}
    data = {"version": getattr(triton, "__version__", None), "backends": names, "devices": devices}
    has = [d for d, ok in devices.items() if ok]
    return "ok", data, f"Triton {data['version']}, backends {names or 'none'} (devices: {', '.join(has) or 'none'})"


def step_fla():
    if _version("flash-linear-attention") is None and importlib.util.find_spec("fla") is None:
        raise Absent("flash-linear-attention is not installed")
    module = importlib.import_module("fla")
    version = getattr(module, "__version__", None) or _version("flash-linear-attention")
    return "ok", {"version": version}, f"flash-linear-attention {version} imports"


# ---- runtime -----------------------------------------------------------------------------------

def step_cpu():
    name = _cpu_name()
    total, free = _host_memory()
    capability = _cpu_capability(sys.modules["torch"]) if "torch" in sys.modules else None
    device = {"index": 0, "name": name, "total_memory": total, "free_memory": free, "cores": os.cpu_count()}
    data = {"available": True, "count": 1, "devices": [device], "capability": capability}
    return "ok", data, f"{name}, {os.cpu_count()} cores"


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "CPU"


def _host_memory() -> tuple[int | None, int | None]:
    try:
        import psutil  # noqa: PLC0415

        vm = psutil.virtual_memory()
        return int(vm.total), int(vm.available)
    except ImportError:
        return None, None


def step_cuda_available():
    torch = _torch()
    available = bool(torch.cuda.is_available())
    if not available:
        raise Absent("torch.cuda.is_available() is False")
    data = {"available": True, "count": torch.cuda.device_count(),
            "runtime_version": torch.version.hip or torch.version.cuda, "driver_version": _cuda_driver(torch)}
    return "ok", data, f"{data['count']} device(s)"


def _cuda_driver(torch) -> str | None:
    """The kernel driver's version: /proc (NVIDIA), else NVML when nvidia-ml-py is installed."""
    if torch.version.hip:
        return None
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8") as f:
            match = re.search(r"Kernel Module\s+(?:for \S+\s+)?([0-9][0-9.]+)", f.read())
            if match:
                return match.group(1)
    except OSError:
        pass
    try:
        import pynvml  # noqa: PLC0415

        pynvml.nvmlInit()
        version = pynvml.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:
        return None


def step_cuda_devices():
    torch = _torch()
    devices = []
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        devices.append({"index": i, "name": p.name, "total_memory": int(p.total_memory),
                        "capability": f"{p.major}.{p.minor}"})
    return "ok", {"devices": devices}, "; ".join(d["name"] for d in devices)


def step_cuda_memory():
    torch = _torch()
    free = {}
    for i in range(torch.cuda.device_count()):
        f, t = torch.cuda.mem_get_info(i)
        free[str(i)] = {"free_memory": int(f), "total_memory": int(t)}
    return "ok", {"memory": free}, f"free memory read on {len(free)} device(s)"


def step_xpu_available():
    torch = _torch()
    if not hasattr(torch, "xpu"):
        raise Absent("this torch has no torch.xpu")
    if not torch.xpu.is_available():
        raise Absent("torch.xpu.is_available() is False")
    data = {"available": True, "count": torch.xpu.device_count(), "runtime_version": getattr(torch.version, "xpu", None)}
    return "ok", data, f"{data['count']} device(s)"


# Device properties worth showing; which exist depends on the torch version.
_XPU_PROPS = ("driver_version", "platform_name", "vendor", "version", "gpu_eu_count", "max_compute_units",
              "has_fp16", "has_fp64", "has_atomic64", "has_subgroup_matrix_multiply_accumulate",
              "has_subgroup_matrix_multiply_accumulate_tensor_float32", "max_work_group_size")


def step_xpu_devices():
    torch = _torch()
    devices = []
    for i in range(torch.xpu.device_count()):
        p = torch.xpu.get_device_properties(i)
        device = {"index": i, "name": p.name, "total_memory": int(p.total_memory)}
        for attr in _XPU_PROPS:
            if hasattr(p, attr):
                value = getattr(p, attr)
                device[attr] = value if isinstance(value, (bool, int, float, str)) else str(value)
        devices.append(device)
    driver = devices[0].get("driver_version") if devices else None
    return "ok", {"devices": devices, "driver_version": driver}, "; ".join(d["name"] for d in devices)


def step_xpu_memory():
    torch = _torch()
    free = {}
    for i in range(torch.xpu.device_count()):
        f, t = torch.xpu.mem_get_info(i)
        free[str(i)] = {"free_memory": int(f), "total_memory": int(t)}
    return "ok", {"memory": free}, f"free memory read on {len(free)} device(s)"


def step_npu():
    if _version("torch-npu") is None and importlib.util.find_spec("torch_npu") is None:
        raise Absent("torch_npu is not installed")
    torch = _torch()
    importlib.import_module("torch_npu")
    if not torch.npu.is_available():
        raise Absent("torch.npu.is_available() is False")
    devices = []
    for i in range(torch.npu.device_count()):
        f, t = torch.npu.mem_get_info(i)
        devices.append({"index": i, "name": torch.npu.get_device_name(i), "total_memory": int(t), "free_memory": int(f)})
    data = {"available": True, "count": len(devices), "devices": devices}
    return "ok", data, "; ".join(d["name"] for d in devices)


def step_mps():
    torch = _torch()
    mps = getattr(torch.backends, "mps", None)
    if mps is None or not mps.is_available():
        raise Absent("torch.backends.mps.is_available() is False")
    total = None
    try:
        total = int(torch.mps.recommended_max_memory())
    except Exception:
        pass
    device = {"index": 0, "name": "Apple MPS", "total_memory": total}
    return "ok", {"available": True, "count": 1, "devices": [device]}, "MPS available"


STEPS: tuple[Step, ...] = (
    Step("python", "libraries", "Python interpreter", (), step_python),
    Step("packages", "libraries", "installed packages and their versions", (), step_packages),
    Step("torch", "libraries", "import torch and read its build", (), step_torch),
    Step("ipex", "libraries", "import intel-extension-for-pytorch", ("torch",), step_ipex),
    Step("triton", "libraries", "import Triton and list its backends", (), step_triton),
    Step("fla", "libraries", "import flash-linear-attention", ("torch",), step_fla),
    Step("cpu", "runtime", "CPU and host memory", (), step_cpu),
    Step("cuda.available", "runtime", "torch.cuda.is_available() and device_count()", ("torch",), step_cuda_available),
    Step("cuda.devices", "runtime", "torch.cuda.get_device_properties()", ("cuda.available",), step_cuda_devices),
    Step("cuda.memory", "runtime", "torch.cuda.mem_get_info()", ("cuda.available",), step_cuda_memory),
    Step("xpu.available", "runtime", "torch.xpu.is_available() and device_count()", ("torch",), step_xpu_available),
    Step("xpu.devices", "runtime", "torch.xpu.get_device_properties()", ("xpu.available",), step_xpu_devices),
    Step("xpu.memory", "runtime", "torch.xpu.mem_get_info()", ("xpu.available",), step_xpu_memory),
    Step("npu", "runtime", "torch_npu: is_available, names, mem_get_info", ("torch",), step_npu),
    Step("mps", "runtime", "torch.backends.mps.is_available()", ("torch",), step_mps),
)
STEP_NAMES = tuple(s.name for s in STEPS)


def parse_simulation(text: str) -> dict[str, str]:
    """"crash:xpu.devices,hang:cuda.memory" -> {"xpu.devices": "crash", "cuda.memory": "hang"}."""
    plan: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        action, _, step = item.partition(":")
        if action not in ("crash", "hang", "raise") or step not in STEP_NAMES:
            raise ValueError(f"bad probe simulation {item!r}: use crash|hang|raise:STEP with STEP in {', '.join(STEP_NAMES)}")
        plan[step] = action
    return plan


def _simulate(action: str) -> None:
    if action == "crash":
        os.abort()  # SIGABRT, like the native crashes seen in torch.xpu
    if action == "hang":
        while True:
            time.sleep(3600)
    raise RuntimeError("simulated failure")


def run(names: list[str], simulate: dict[str, str], out) -> None:
    by_name = {s.name: s for s in STEPS}
    failed: set[str] = set()  # failed or skipped in this run
    absent: set[str] = set()

    def emit(**event) -> None:
        out.write(json.dumps(event, default=str) + "\n")
        out.flush()

    for name in names:
        step = by_name[name]
        emit(event="begin", step=name)
        start = time.perf_counter()
        blocked = [d for d in step.needs if d in failed]
        missing = [d for d in step.needs if d in absent]
        if blocked and name not in simulate:
            verdict, data, detail = "skipped", {}, f"needs {', '.join(blocked)}, which did not succeed"
        elif missing and name not in simulate:
            verdict, data, detail = "absent", {}, f"not applicable: {', '.join(missing)} found nothing"
        else:
            try:
                if name in simulate:  # before the step's own checks, so any step can be made to fail
                    _simulate(simulate[name])
                verdict, data, detail = step.run()
            except Absent as err:
                verdict, data, detail = "absent", {}, str(err)
            except Exception as err:  # a failing step is a finding, not the end of the probe
                verdict, data, detail = "failed", {"traceback": traceback.format_exc(limit=6)}, f"{type(err).__name__}: {err}"
        if verdict == "absent":
            absent.add(name)
        elif verdict != "ok":
            failed.add(name)
        emit(event="end", step=name, verdict=verdict, data=data, detail=detail, seconds=round(time.perf_counter() - start, 4))


def main(argv: list[str] | None = None) -> int:
    import argparse  # noqa: PLC0415

    parser = argparse.ArgumentParser(prog="python -m bringup.core.probe.child")
    parser.add_argument("--steps", default=",".join(STEP_NAMES))
    parser.add_argument("--simulate", default="")
    args = parser.parse_args(argv)
    names = [n for n in args.steps.split(",") if n]
    unknown = [n for n in names if n not in STEP_NAMES]
    if unknown:
        parser.error(f"unknown step(s) {unknown}; known: {', '.join(STEP_NAMES)}")
    simulate = parse_simulation(",".join(filter(None, [args.simulate, os.environ.get(SIMULATE_ENV, "")])))
    # The protocol gets a private copy of stdout; fd 1 goes to stderr so library chatter can't corrupt it.
    out = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    run(names, simulate, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
