"""What this machine really has: the device probe, run in child processes so a crash can't take us down.

`run_probe()` starts `python -m bringup.core.probe.child`, which runs the steps of
`probe_child.STEPS` (libraries first, then runtime) and reports each one. When a step kills its
process (on some Intel systems `torch.xpu` calls segfault) or hangs past the timeout, the step is
recorded as `crashed` / `timeout`, a finding names it, the steps that need it are skipped, and a
fresh child runs the rest. The caller always gets a `ProbeReport`.
"""

from __future__ import annotations

import collections
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from bringup.core.probe.child import SIMULATE_ENV, STEPS, parse_simulation
from bringup.core.finding import Finding

DEVICE_KINDS = ("cpu", "cuda", "xpu", "npu", "mps")
FAILED_VERDICTS = ("failed", "crashed", "timeout", "skipped")
_STEP = {s.name: s for s in STEPS}

# Known native failures per step family, cited in crash findings.
_CRASH_SOURCES = {
    "xpu": "pytorch#179891 (torch.xpu.get_device_properties segfaults on Arc Pro B70); torch-xpu-ops#4045 "
           "(torch.xpu.is_available() segfaults on WSL2 with torch 2.13); pytorch#157775 (access violation on Windows)",
}


@dataclass
class StepResult:
    name: str
    layer: str  # libraries | runtime
    title: str
    verdict: str  # ok | absent | failed | skipped | crashed | timeout
    detail: str = ""
    data: dict = field(default_factory=dict)
    seconds: float = 0.0

    def to_json(self) -> dict:
        return {"name": self.name, "layer": self.layer, "title": self.title, "verdict": self.verdict,
                "detail": self.detail, "data": self.data, "seconds": self.seconds}


@dataclass
class DeviceReport:
    kind: str
    available: bool
    verdict: str  # ok | absent | or the worst failing verdict of its steps
    count: int = 0
    devices: list[dict] = field(default_factory=list)  # index, name, total_memory, free_memory, ...
    runtime_version: str | None = None
    driver_version: str | None = None
    detail: str = ""

    def to_json(self) -> dict:
        return {"kind": self.kind, "available": self.available, "verdict": self.verdict, "count": self.count,
                "devices": self.devices, "runtime_version": self.runtime_version,
                "driver_version": self.driver_version, "detail": self.detail}


@dataclass
class ProbeReport:
    steps: list[StepResult]
    findings: list[Finding]
    seconds: float
    children: int = 1  # child processes it took (more than one after a crash or a hang)

    def step(self, name: str) -> StepResult | None:
        return next((s for s in self.steps if s.name == name), None)

    def _data(self, name: str) -> dict:
        s = self.step(name)
        return s.data if s and s.verdict == "ok" else {}

    @property
    def python(self) -> dict:
        return self._data("python")

    @property
    def torch(self) -> dict | None:
        return self._data("torch") or None

    @property
    def packages(self) -> dict:
        return self._data("packages")

    @property
    def triton(self) -> dict:
        s = self.step("triton")
        data = self._data("triton")
        return {"installed": bool(s and s.verdict not in ("absent",)), "verdict": s.verdict if s else None,
                "version": data.get("version"), "backends": data.get("backends", []),
                "devices": data.get("devices", {"cuda": False, "xpu": False, "cpu": False})}

    def library(self, name: str) -> dict:
        """ipex / fla: installed, importable, version."""
        s = self.step(name)
        return {"installed": bool(s and s.verdict != "absent"), "importable": bool(s and s.verdict == "ok"),
                "verdict": s.verdict if s else None, "version": self._data(name).get("version"), "detail": s.detail if s else ""}

    @property
    def devices(self) -> dict[str, DeviceReport]:
        return {kind: _device_report(self, kind) for kind in DEVICE_KINDS}

    def available_devices(self) -> list[str]:
        return [k for k, d in self.devices.items() if d.available]

    def xpu_has_xmx(self) -> bool | None:
        """Whether the first XPU reports XMX matrix engines (SGLang's intel_xpu backend needs them); None if unknown."""
        devices = self.devices["xpu"].devices
        value = devices[0].get("has_subgroup_matrix_multiply_accumulate") if devices else None
        return value if isinstance(value, bool) else None

    def cuda_generation(self) -> str | None:
        """hopper | blackwell | other for the first CUDA device (decides SGLang's default backend); None if none."""
        devices = self.devices["cuda"].devices
        capability = devices[0].get("capability") if devices else None
        if not capability:
            return None
        major = int(str(capability).split(".")[0])
        return {9: "hopper", 10: "blackwell"}.get(major, "other")

    @property
    def ok(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)

    def to_json(self) -> dict:
        packages = self.packages
        return {
            "ok": self.ok,
            "python": self.python,
            "torch": self.torch,
            "packages": packages,
            "transformers": packages.get("transformers"),
            "sglang": packages.get("sglang"),
            "ipex": self.library("ipex"),
            "triton": self.triton,
            "fla": self.library("fla"),
            "devices": {k: d.to_json() for k, d in self.devices.items()},
            "steps": [s.to_json() for s in self.steps],
            "findings": [f.to_json() for f in self.findings],
            "seconds": self.seconds,
            "children": self.children,
        }


def _device_report(report: ProbeReport, kind: str) -> DeviceReport:
    names = [s.name for s in STEPS if s.name == kind or s.name.startswith(kind + ".")]
    steps = [report.step(n) for n in names if report.step(n)]
    if not steps:
        return DeviceReport(kind, False, "skipped", detail="not probed")
    bad = [s for s in steps if s.verdict in FAILED_VERDICTS]
    first = steps[0]
    if first.verdict != "ok":
        verdict = first.verdict
        return DeviceReport(kind, False, verdict, detail=f"{first.name}: {first.detail}")
    data = dict(first.data)
    devices = [dict(d) for d in data.get("devices", [])]
    for s in steps[1:]:
        if s.verdict != "ok":
            continue
        if "devices" in s.data:
            devices = [dict(d) for d in s.data["devices"]]
        for index, mem in s.data.get("memory", {}).items():
            target = next((d for d in devices if str(d.get("index")) == index), None)
            if target is None:
                target = {"index": int(index)}
                devices.append(target)
            target.update(mem)
        data.setdefault("driver_version", s.data.get("driver_version"))
        if s.data.get("driver_version"):
            data["driver_version"] = s.data["driver_version"]
    verdict = bad[0].verdict if bad else "ok"
    detail = "; ".join(f"{s.name}: {s.verdict} ({s.detail})" for s in bad) or first.detail
    return DeviceReport(kind, True, verdict, count=int(data.get("count", len(devices))), devices=devices,
                        runtime_version=data.get("runtime_version"), driver_version=data.get("driver_version"),
                        detail=detail)


# ---- running the child ---------------------------------------------------------------------------

class _Child:
    """One probe child; its protocol lines arrive on a queue, its stderr is kept for crash reports."""

    def __init__(self, python: str, names: list[str], simulate: str) -> None:
        env = dict(os.environ)
        env.pop(SIMULATE_ENV, None)  # the parent passes the simulation explicitly
        env["PYTHONUNBUFFERED"] = "1"
        argv = [python, "-m", "bringup.core.probe.child", "--steps", ",".join(names)]
        if simulate:
            argv += ["--simulate", simulate]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                     text=True, encoding="utf-8", errors="replace", env=env, start_new_session=True)
        self.lines: queue.Queue = queue.Queue()
        self.stderr: collections.deque[str] = collections.deque(maxlen=40)
        threading.Thread(target=self._pump_stdout, daemon=True).start()
        self._err = threading.Thread(target=self._pump_stderr, daemon=True)
        self._err.start()

    def _pump_stdout(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)  # end of stream: the child exited (or closed stdout)

    def _pump_stderr(self) -> None:
        for line in self.proc.stderr:
            self.stderr.append(line.rstrip("\n"))

    def kill(self) -> None:
        """End this child and anything it started (it has its own process group)."""
        try:
            if os.name == "posix":
                os.killpg(self.proc.pid, signal.SIGKILL)
            else:
                self.proc.kill()
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()

    def exit_text(self) -> str:
        from bringup.core.exit_status import exit_text

        rc = self.proc.wait()
        self._err.join(timeout=2)
        return exit_text(rc)


def run_probe(*, timeout: float = 60.0, steps: list[str] | None = None, simulate: str | None = None,
              python: str | None = None, on_step: Callable[[StepResult], None] | None = None,
              cancel: Callable[[], bool] | None = None, total_timeout: float | None = None) -> ProbeReport:
    """Probe this machine. `timeout` is per step, in seconds; past `total_timeout` (if given) the steps
    not yet run are reported as skipped. `steps` picks a subset (in probe order).
    `simulate` ("crash:STEP,hang:STEP", also read from $BRINGUP_PROBE_SIMULATE) makes the child fail
    on purpose, for tests and demos of the recovery. `on_step` sees each result as it arrives."""
    started = time.monotonic()
    names = [s.name for s in STEPS] if steps is None else [n for n in (s.name for s in STEPS) if n in steps]
    unknown = sorted(set(steps or ()) - set(_STEP))
    if unknown:
        raise ValueError(f"unknown probe step(s) {unknown}; known: {', '.join(_STEP)}")
    simulate = ",".join(filter(None, [simulate or "", os.environ.get(SIMULATE_ENV, "")]))
    parse_simulation(simulate)  # bad text fails here, in the caller, not in the child
    results: dict[str, StepResult] = {}
    crash_notes: dict[str, str] = {}
    pending = list(names)
    children = 0

    def record(result: StepResult) -> None:
        results[result.name] = result
        if result.name in pending:
            pending.remove(result.name)
        if on_step:
            on_step(result)

    def skip_dependents(root: str) -> None:
        for name in list(pending):
            if _needs(name, root):
                record(StepResult(name, _STEP[name].layer, _STEP[name].title, "skipped",
                                  f"needs {root}, which {results[root].verdict}"))

    while pending:
        if cancel and cancel():
            break
        if total_timeout is not None and time.monotonic() - started > total_timeout:
            for name in list(pending):
                record(StepResult(name, _STEP[name].layer, _STEP[name].title, "skipped",
                                  f"the probe stopped after {total_timeout:g} s in all"))
            break
        children += 1
        child = _Child(python or sys.executable, pending, simulate)
        current: str | None = None
        begun = time.monotonic()
        try:
            while True:
                wait = max(0.0, timeout - (time.monotonic() - begun))
                try:
                    line = child.lines.get(timeout=min(wait, 0.25) if cancel else wait)
                except queue.Empty:
                    if cancel and cancel():
                        child.kill()
                        pending.clear()
                        break
                    if time.monotonic() - begun < timeout:
                        continue
                    child.kill()
                    stuck = current or pending[0]
                    record(StepResult(stuck, _STEP[stuck].layer, _STEP[stuck].title, "timeout",
                                      f"no answer within {timeout:g} s; the probe process was stopped", seconds=timeout))
                    skip_dependents(stuck)
                    break
                if line is None:  # the child is gone
                    how = child.exit_text()
                    tail = "\n".join(list(child.stderr)[-8:])
                    stuck = current or (pending[0] if pending else None)
                    if stuck is not None:
                        detail = f"the probe process {how} during this step" if current else \
                            f"the probe process {how} before this step began"
                        record(StepResult(stuck, _STEP[stuck].layer, _STEP[stuck].title, "crashed", detail,
                                          seconds=round(time.monotonic() - begun, 4)))
                        crash_notes[stuck] = tail
                        skip_dependents(stuck)
                    break
                event = _parse(line)
                if event is None:
                    continue
                if event["event"] == "begin":
                    current, begun = event["step"], time.monotonic()
                elif event["event"] == "end":
                    name = event["step"]
                    record(StepResult(name, _STEP[name].layer, _STEP[name].title, event.get("verdict", "failed"),
                                      event.get("detail", ""), event.get("data") or {}, float(event.get("seconds", 0.0))))
                    current, begun = None, time.monotonic()
        finally:
            if child.proc.poll() is None:
                child.kill()
    ordered = [results[n] for n in names if n in results]
    return ProbeReport(ordered, findings_for(ordered, crash_notes), round(time.monotonic() - started, 3), children)


def _parse(line: str) -> dict | None:
    try:
        event = json.loads(line)
    except json.JSONDecodeError:
        return None
    if not isinstance(event, dict) or event.get("step") not in _STEP or event.get("event") not in ("begin", "end"):
        return None
    return event


def _needs(name: str, root: str) -> bool:
    """Does step `name` need `root`, directly or through another step?"""
    todo, seen = list(_STEP[name].needs), set()
    while todo:
        dep = todo.pop()
        if dep == root:
            return True
        if dep not in seen:
            seen.add(dep)
            todo.extend(_STEP[dep].needs)
    return False


# ---- findings ----------------------------------------------------------------------------------

def findings_for(steps: list[StepResult], crash_notes: dict[str, str] | None = None) -> list[Finding]:
    crash_notes = crash_notes or {}
    by_name = {s.name: s for s in steps}
    out: list[Finding] = []
    for s in steps:
        family = s.name.split(".")[0]
        if s.verdict == "crashed":
            out.append(Finding.check(
                "PROBE_STEP_CRASHED", "error",
                f"Probe step '{s.name}' ({s.title}) crashed: {s.detail}. The other steps ran in a fresh process; "
                f"what this step would have reported is unknown, and an engine on this machine will likely crash the same way.",
                fix=_crash_fix(family),
                engine_message=crash_notes.get(s.name, ""),
                source=_CRASH_SOURCES.get(family, "core/probe/child.py"), stage=s.name))
        elif s.verdict == "timeout":
            out.append(Finding.check(
                "PROBE_STEP_TIMEOUT", "error",
                f"Probe step '{s.name}' ({s.title}) hung: {s.detail}. The remaining steps ran in a fresh process.",
                fix=_crash_fix(family), source=_CRASH_SOURCES.get(family, "core/probe/child.py"), stage=s.name))
        elif s.verdict == "failed":
            out.append(Finding.check(
                "PROBE_STEP_FAILED", "warning", f"Probe step '{s.name}' ({s.title}) raised {s.detail}.",
                fix="see the traceback in the step's data; reinstall or update the package it names",
                engine_message=s.data.get("traceback", ""), source="core/probe/child.py", stage=s.name))
    out += _build_findings(by_name)
    return out


def _crash_fix(family: str) -> str:
    if family == "xpu":
        return ("update the Intel GPU driver (level-zero) and torch's XPU build together; run the probe again with "
                "ZE_AFFINITY_MASK set to one device to see whether one card is the cause")
    if family == "cuda":
        return "check the NVIDIA driver against torch's CUDA version (nvidia-smi); set CUDA_VISIBLE_DEVICES to one device"
    return "run `python -m bringup.core.probe.child --steps " + family + "` in a terminal to see the native error"


def _build_findings(by_name: dict[str, StepResult]) -> list[Finding]:
    """Facts that follow from several steps together: a build that can't see a device, Triton without a backend."""
    out: list[Finding] = []
    torch = by_name.get("torch")
    build = torch.data.get("build") if torch and torch.verdict == "ok" else None
    if build == "CPU only":
        out.append(Finding.check(
            "TORCH_CPU_BUILD", "info",
            "torch is a CPU-only build, so CUDA and XPU devices are out of its reach whatever hardware is present.",
            fix="for Intel GPUs: pip install torch --index-url https://download.pytorch.org/whl/xpu ; for NVIDIA: the CUDA wheel",
            source="torch.version.cuda / torch.version.xpu"))
    triton = by_name.get("triton")
    if triton and triton.verdict == "ok":
        for device in ("cuda", "xpu"):
            dev = by_name.get(f"{device}.available")
            if dev and dev.verdict == "ok" and not triton.data.get("devices", {}).get(device):
                pkg = "pytorch-triton-xpu" if device == "xpu" else "the triton that matches torch"
                out.append(Finding.check(
                    "TRITON_NO_BACKEND", "warning",
                    f"A {device} device is present but Triton {triton.data.get('version')} has no backend for it "
                    f"(backends: {triton.data.get('backends')}): Triton kernels (flash-linear-attention, SGLang's triton "
                    f"attention backend) cannot run on {device}.",
                    fix=f"install {pkg}", source="triton.backends"))
    xpu = by_name.get("xpu.devices")
    if xpu and xpu.verdict == "ok":
        for d in xpu.data.get("devices", []):
            if d.get("has_subgroup_matrix_multiply_accumulate") is False:
                out.append(Finding.check(
                    "XPU_NO_XMX", "info",
                    f"XPU {d['index']} ({d['name']}) reports no XMX matrix engines: SGLang's intel_xpu attention backend "
                    "falls back to triton there.",
                    engine_message="The current platform does not support Intel XMX, will fallback to triton backend.",
                    source="sglang layers/attention/xpu_backend.py"))
    return out
