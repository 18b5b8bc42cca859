"""What each engine step spends besides the GPU's work: Triton compiles (each kernel specialization,
a disk-cache hit or a real compile, with its time), Triton autotunes, the caching allocator's new
device segments (cudaMalloc) and retries, and Python's garbage collections.

    trace = StepTrace().install()
    with trace.step(label):        # one engine.step(); the engine's own token read ends the GPU work
        engine.step()
    trace.rows                     # one dict per step: seconds, compiles, autotunes, gc (segments: alloc=True)

A measuring tool for bench/nano_full.py (`--trace-steps`); it patches Triton's JIT compile entry and
the autotuner's benchmark call while installed, and changes nothing they compute.
"""

from __future__ import annotations

import gc
import time
from contextlib import contextmanager

import torch


class StepTrace:
    def __init__(self):
        self.rows: list[dict] = []
        self._events: list[dict] = []  # compiles, autotunes and collections of the current step
        self._undo = []

    def install(self) -> "StepTrace":
        gc_started = {}

        def on_gc(phase, info):
            if phase == "start":
                gc_started["t"] = time.perf_counter()
            elif "t" in gc_started:
                self._events.append({"kind": "gc", "generation": info.get("generation"),
                                      "s": time.perf_counter() - gc_started.pop("t")})

        gc.callbacks.append(on_gc)
        self._undo.append(lambda: gc.callbacks.remove(on_gc))
        try:
            from triton.runtime import autotuner, jit
        except ImportError:
            return self
        trace = self
        if not hasattr(jit.JITFunction, "_do_compile") or not hasattr(autotuner.Autotuner, "_bench"):
            print("step trace: this Triton has no JITFunction._do_compile / Autotuner._bench; compiles not traced")
            return self
        compile_ = jit.JITFunction._do_compile

        def do_compile(fn, key, *args, **kwargs):
            t = time.perf_counter()
            try:
                return compile_(fn, key, *args, **kwargs)
            finally:
                name = getattr(getattr(fn, "fn", None), "__name__", None) or getattr(fn, "__name__", "?")
                trace._events.append({"kind": "compile", "name": name, "s": time.perf_counter() - t,
                                      "key": str(key)[:400]})

        jit.JITFunction._do_compile = do_compile
        self._undo.append(lambda: setattr(jit.JITFunction, "_do_compile", compile_))
        bench_ = autotuner.Autotuner._bench

        def bench(tuner, *args, **kwargs):
            t = time.perf_counter()
            try:
                return bench_(tuner, *args, **kwargs)
            finally:
                name = getattr(getattr(tuner, "base_fn", None), "__name__", None) or "?"
                trace._events.append({"kind": "autotune_bench", "name": name, "s": time.perf_counter() - t})

        autotuner.Autotuner._bench = bench
        self._undo.append(lambda: setattr(autotuner.Autotuner, "_bench", bench_))
        return self

    def uninstall(self) -> None:
        while self._undo:
            self._undo.pop()()

    @contextmanager
    def step(self, label: str = "", alloc: bool = False, **info):
        """`alloc`: also count the allocator's new segments (torch.cuda.memory_stats costs a few
        hundred microseconds a call: left out of per-step traces unless asked for)."""
        self._events = []
        before = _alloc_stats() if alloc else {}
        torch.cuda.synchronize()
        t = time.perf_counter()
        yield
        torch.cuda.synchronize()
        seconds = time.perf_counter() - t
        after = _alloc_stats() if alloc else {}
        compiles = [e for e in self._events if e["kind"] == "compile"]
        tunes = [e for e in self._events if e["kind"] == "autotune_bench"]
        row = {"label": label, **info, "seconds": seconds,
               "compiles": len(compiles), "compile_s": sum(e["s"] for e in compiles),
               "autotune_benches": len(tunes), "autotune_s": sum(e["s"] for e in tunes),
               "gc_s": sum(e["s"] for e in self._events if e["kind"] == "gc"),
               **{k: after[k] - before[k] for k in after},
               "events": [e for e in self._events if e["kind"] != "gc" or e["s"] > 0.005]}
        self.rows.append(row)

    def summary(self, row: dict) -> str:
        names = {}
        for e in row["events"]:
            if e["kind"] in ("compile", "autotune_bench"):
                key = f"{e['kind'][0]}:{e['name']}"
                n, s = names.get(key, (0, 0.0))
                names[key] = (n + 1, s + e["s"])
        top = ", ".join(f"{k} x{n} {s:.2f}s" for k, (n, s) in sorted(names.items(), key=lambda kv: -kv[1][1])[:6])
        alloc = (f", new segments {row['segments']} ({row['segment_bytes'] / 2**20:.0f} MiB), alloc retries "
                 f"{row['retries']}" if "segments" in row else "")
        return (f"{row['label']}: {row['seconds'] * 1e3:.0f} ms; compiles {row['compiles']} ({row['compile_s']:.2f} s), "
                f"autotune {row['autotune_benches']} ({row['autotune_s']:.2f} s){alloc}, "
                f"gc {row['gc_s'] * 1e3:.0f} ms{'; ' + top if top else ''}")


def _alloc_stats() -> dict:
    s = torch.cuda.memory_stats()
    return {"segments": int(s.get("segment.all.allocated", 0)), "segment_bytes": int(s.get("reserved_bytes.all.allocated", 0)),
            "retries": int(s.get("num_alloc_retries", 0)), "device_allocs": int(s.get("num_device_alloc", 0))}
