"""Throughput of the embedded engine against transformers' `generate`, same checkpoint, same run.

The workload follows nano-vllm's bench: `num_seqs` prompts of random token ids with random input
and output lengths drawn from the given ranges with a fixed seed, generated with `ignore_eos` so
every request produces exactly the tokens it asked for. Both sides decode greedily.

The baseline is transformers at its best ordinary use: the same requests in order, in
left-padded batches (with attention masks) of the engine's own batch size. Each batch generates
its longest request's length (`min_new_tokens = max_new_tokens`), and only the tokens each request
asked for are counted, so both sides are credited with the same output tokens. Both are warmed
up first; the engine is freed before the baseline loads, so they never share the device memory.

Each side runs the workload `repeats` times (3 on the CPU unless asked otherwise, where a
neighbour's busy spell on this project's shared 2-core machine slowed a run of either side by up
to 60 %; 1 on accelerators) and is credited with its fastest run, as timeit does; every run's time
is printed and kept in the result. On the CPU, with a checkpoint, the two sides stay loaded and
their runs alternate (engine, baseline, engine, ...), so such a spell costs both sides alike.
"""

from __future__ import annotations

import gc
import random
import time
from dataclasses import asdict, dataclass, field

from bringup.core.errors import UserError


@dataclass
class BenchSettings:
    source: str | None
    device: str = "auto"
    dtype: str = "auto"
    num_seqs: int = 16
    input_len: tuple[int, int] = (16, 64)
    output_len: tuple[int, int] = (16, 64)
    seed: int = 0
    baseline: str | None = "transformers"
    max_running_requests: int | None = None
    mem_fraction: float | None = None
    load_format: str = "auto"
    cpu_threads: int | None = None  # on the CPU: torch threads for both sides (None: the engine's choice)
    repeats: int | None = None  # runs of the workload per side, the fastest counts (None: 3 on the CPU, else 1)
    cpu_compile: bool | None = None  # on the CPU: the compiled decode step (None: the engine's default, on)

    def engine_config(self, model: str | None = None):
        """The EngineConfig the bench starts (`model`: the source resolved to what the engine loads)."""
        from bringup.core.engine.config import EngineConfig

        return EngineConfig(model or self.source, device=self.device, dtype=self.dtype, mem_fraction=self.mem_fraction,
                            max_running_requests=self.max_running_requests, load_format=self.load_format,
                            cpu_threads=self.cpu_threads, cpu_compile=self.cpu_compile)


@dataclass
class BenchResult:
    settings: BenchSettings
    model: str
    batch_size: int
    output_tokens: int
    input_tokens: int
    engine_seconds: float
    engine_tok_s: float
    baseline_seconds: float | None = None
    baseline_tok_s: float | None = None
    notes: list[str] = field(default_factory=list)
    # On the CPU: torch's threads (both sides run with them), the CPU time each side used (this
    # process's, less noisy than wall time on a shared machine) and the 1-minute load average
    # before and after each side.
    threads: int | None = None
    engine_cpu_seconds: float | None = None
    baseline_cpu_seconds: float | None = None
    load: dict = field(default_factory=dict)
    # On the CPU: seconds the engine spent compiling its decode step at start-up (not timed), None if eager.
    cpu_compile_seconds: float | None = None
    engine_runs: list[float] = field(default_factory=list)  # seconds of every run (the fastest is engine_seconds)
    baseline_runs: list[float] = field(default_factory=list)
    weights: dict = field(default_factory=dict)  # the weight scheme the engine ran (/server_info's `weights`)

    @property
    def cpu_ratio(self) -> float | None:
        """Baseline CPU time over the engine's for the same tokens (None unless both were timed)."""
        if not self.engine_cpu_seconds or not self.baseline_cpu_seconds:
            return None
        return self.baseline_cpu_seconds / self.engine_cpu_seconds

    @property
    def ratio(self) -> float | None:
        if not self.baseline_tok_s:
            return None
        return self.engine_tok_s / self.baseline_tok_s

    def to_json(self) -> dict:
        s = asdict(self.settings)
        s["input_len"], s["output_len"] = list(self.settings.input_len), list(self.settings.output_len)
        return {"engine_tok_s": round(self.engine_tok_s, 2),
                "baseline_tok_s": None if self.baseline_tok_s is None else round(self.baseline_tok_s, 2),
                "ratio": None if self.ratio is None else round(self.ratio, 3),
                "model": self.model, "batch_size": self.batch_size, "output_tokens": self.output_tokens,
                "input_tokens": self.input_tokens, "engine_seconds": round(self.engine_seconds, 3),
                "baseline_seconds": None if self.baseline_seconds is None else round(self.baseline_seconds, 3),
                "threads": self.threads,
                "cpu_compile_seconds": None if self.cpu_compile_seconds is None else round(self.cpu_compile_seconds, 2),
                "engine_cpu_seconds": None if self.engine_cpu_seconds is None else round(self.engine_cpu_seconds, 3),
                "baseline_cpu_seconds": None if self.baseline_cpu_seconds is None else round(self.baseline_cpu_seconds, 3),
                "cpu_ratio": None if self.cpu_ratio is None else round(self.cpu_ratio, 3),
                "load": {k: round(v, 2) for k, v in self.load.items()},
                "engine_runs": [round(v, 3) for v in self.engine_runs],
                "baseline_runs": [round(v, 3) for v in self.baseline_runs],
                "weights": self.weights, **s, "notes": self.notes}


def parse_range(text: str, what: str) -> tuple[int, int]:
    """'MIN:MAX' (or one number) -> (MIN, MAX), both >= 1."""
    parts = str(text).split(":")
    try:
        lo, hi = (int(parts[0]), int(parts[-1])) if len(parts) in (1, 2) else (None, None)
    except ValueError:
        lo = hi = None
    if lo is None or hi is None or lo < 1 or hi < lo:
        raise UserError(f"{what} {text!r} is not a range; write MIN:MAX with 1 <= MIN <= MAX, e.g. {what} 16:64")
    return lo, hi


def make_workload(num_seqs: int, input_len: tuple[int, int], output_len: tuple[int, int], seed: int,
                  vocab_size: int, low_id: int = 3) -> list[tuple[list[int], int]]:
    """[(prompt ids, output length)], reproducible from the seed (ids avoid the special tokens 0..2)."""
    rng = random.Random(seed)
    high = max(low_id + 1, vocab_size) - 1
    work = []
    for _ in range(num_seqs):
        n = rng.randint(*input_len)
        work.append(([rng.randint(low_id, high) for _ in range(n)], rng.randint(*output_len)))
    return work


PROGRESS_EVERY_S = 5.0  # a long run says how far it is this often


def run_engine(engine, work, progress=None) -> tuple[float, int]:
    """(seconds, output tokens) for the whole workload submitted at once. `progress(done, total)`
    (output tokens) is called every PROGRESS_EVERY_S while it runs."""
    from bringup.core.engine.sampling import SamplingParams

    params = [SamplingParams(max_new_tokens=n, temperature=0.0, ignore_eos=True) for _, n in work]
    expected = sum(n for _, n in work)
    start = time.perf_counter()
    ids = [engine.add_request(p, sp, detokenize=False) for (p, _), sp in zip(work, params)]
    results: dict = {rid: [] for rid in ids}
    pending, said = set(ids), start
    while pending:  # Engine.generate's loop, with a progress line now and then
        for out in engine.step():
            if out.request_id in results:
                results[out.request_id] += out.token_ids
                if out.finished:
                    pending.discard(out.request_id)
        if progress is not None and time.perf_counter() - said >= PROGRESS_EVERY_S:
            said = time.perf_counter()
            progress(sum(len(r) for r in results.values()), expected)
    seconds = time.perf_counter() - start
    outs = [results[rid] for rid in ids]
    produced = sum(len(o) for o in outs)
    if produced != expected:
        raise RuntimeError(f"the engine produced {produced} tokens, the workload asked for {expected}")
    return seconds, produced


def run_transformers(model, work, batch_size: int, pad_id: int, device, progress=None) -> float:
    """Seconds for the workload in left-padded batches of `batch_size`; `progress(batch, batches)`
    after each batch."""
    import torch

    from bringup.core.engine import device as devices

    start = time.perf_counter()
    batches = (len(work) + batch_size - 1) // batch_size
    for i in range(0, len(work), batch_size):
        batch = work[i:i + batch_size]
        width = max(len(p) for p, _ in batch)
        ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, (prompt, _) in enumerate(batch):
            ids[row, width - len(prompt):] = torch.tensor(prompt)
            mask[row, width - len(prompt):] = 1
        new = max(n for _, n in batch)
        with torch.inference_mode():
            out = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device), max_new_tokens=new,
                                 min_new_tokens=new, do_sample=False, pad_token_id=pad_id)
        if out.shape[1] != width + new:
            raise RuntimeError(f"transformers generated {out.shape[1] - width} tokens, asked for {new}")
        if progress is not None:
            progress(i // batch_size + 1, batches)
    devices.synchronize(device)
    return time.perf_counter() - start


def _load_transformers(folder, device, dtype_name: str):
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    # The loading bar is noise in a benchmark's output; transformers' notices about its own kernel
    # fallbacks stay, because they say what the baseline ran.
    hf_logging.disable_progress_bar()
    from pathlib import Path

    from bringup.core.sources.gguf_file import is_gguf_path

    if is_gguf_path(folder):  # transformers dequantises the same file (its GGUF path needs accelerate)
        path = Path(folder)
        model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=getattr(torch, dtype_name))
        return model.to(device).eval()
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=getattr(torch, dtype_name))
    return model.to(device).eval()


def _load() -> float:
    """The 1-minute load average (-1 where the OS has none): the bench prints it beside CPU timings."""
    from bringup.core.engine.cpu_threads import load_average

    load = load_average()
    return -1.0 if load is None else load


CPU_REPEATS = 3


def _timed(run_once) -> tuple[float, float]:
    """(wall seconds `run_once()` reports, CPU seconds this process spent in it)."""
    cpu_started = time.process_time()
    wall = run_once()
    return wall, time.process_time() - cpu_started


def run_bench(settings: BenchSettings, log=print) -> BenchResult:
    from bringup.core.engine import device as devices
    from bringup.core.sources.default_model import DEFAULT_CHECKPOINT_NAME, resolve_default
    from bringup.core.engine.engine import Engine
    from bringup.core.engine.sampling import SamplingParams

    from bringup.core.engine.model_source import model_source

    source = resolve_default(settings.source) or model_source(settings.source, settings.load_format)[0]
    if settings.baseline not in (None, "transformers"):
        raise UserError(f"--baseline {settings.baseline!r} is not known; use transformers or none")
    if settings.repeats is not None and settings.repeats < 1:
        raise UserError(f"--repeats {settings.repeats} must be at least 1")
    log(f"bench: loading {settings.source} for the engine…")
    compile_lines = ("CPU: compil", "CPU: decode step compiled")
    engine = Engine(settings.engine_config(source),
                    log=lambda m: log(f"  engine: {m}") if m.startswith(compile_lines) else None)
    device = engine.device
    threads = engine.cpu_threads  # set for the whole process: the baseline runs with the same threads
    dtype_name = str(engine.dtype).removeprefix("torch.")
    folder = engine.folder
    model_name = DEFAULT_CHECKPOINT_NAME if resolve_default(settings.source) else engine.model_name
    if engine.load_format == "dummy":
        model_name += " (dummy weights)"
    vocab = int(engine.vocab_size or len(engine.tokenizer))
    work = make_workload(settings.num_seqs, settings.input_len, settings.output_len, settings.seed, vocab)
    batch_size = min(engine.max_running_requests, settings.num_seqs)
    on_cpu = device.type == "cpu"
    repeats = settings.repeats or (CPU_REPEATS if on_cpu else 1)
    from bringup.core.engine.engine import weight_scheme

    running = weight_scheme(engine.model)
    log(f"bench: {model_name} on {device} ({dtype_name}; weights {running.label}"
        + (f", {running.products_dtype} products" if running.products_dtype else "")
        + (f", dequantised from {running.dequantised_from}" if running.dequantised_from else "")
        + f"), {settings.num_seqs} seqs, input {settings.input_len[0]}:"
        f"{settings.input_len[1]}, output {settings.output_len[0]}:{settings.output_len[1]}, seed {settings.seed}, "
        f"batch {batch_size}" + (f", {threads} CPU thread(s) for both sides" if threads else ""))
    pad_id = int(engine.config.get("pad_token_id") or 0)
    engine_format_dummy = engine.load_format == "dummy"
    with_baseline = settings.baseline == "transformers"
    if with_baseline and not engine_format_dummy and folder is None:
        raise UserError(f"{settings.source!r} has no checkpoint folder for transformers to load")
    # On the CPU, with weights from a checkpoint, both sides stay loaded and their runs alternate, so a
    # neighbour's busy spell slows one run of each rather than every run of one side. Elsewhere the
    # engine is freed before the baseline loads (device memory holds one of them at a time).
    alternate = on_cpu and with_baseline and not engine_format_dummy and repeats > 1

    engine.generate([work[0][0][:8]] * 2, SamplingParams(max_new_tokens=4, temperature=0.0, ignore_eos=True))
    log(f"  engine: running {settings.num_seqs} requests ({sum(n for _, n in work)} output tokens)"
        + (f", {repeats} times (the fastest counts)" if repeats > 1 else "") + "…")
    load = {"engine_start": _load()}
    produced, engine_runs, engine_cpu, base_runs, base_cpu = [], [], [], [], []
    model = None

    def engine_once() -> float:
        started = time.perf_counter()
        seconds, tokens = run_engine(engine, work, progress=lambda done, total: log(
            f"  engine: {done}/{total} output tokens, {time.perf_counter() - started:.0f} s"))
        engine.check_pools()
        produced.append(tokens)
        return seconds

    def baseline_once() -> float:
        started = time.perf_counter()
        return run_transformers(model, work, batch_size, pad_id, device, progress=lambda b, n: log(
            f"  transformers: batch {b}/{n} done, {time.perf_counter() - started:.0f} s"))

    def run(side: str, once, walls: list, cpus: list) -> None:
        wall, cpu = _timed(once)
        walls.append(wall)
        cpus.append(cpu)
        if repeats > 1:
            log(f"  {side}: run {len(walls)}/{repeats} {wall:.2f} s")

    def warmed(baseline):
        run_transformers(baseline, [(p[:8], 4) for p, _ in work[:batch_size]], batch_size, pad_id, device)
        return baseline

    def load_baseline():
        log("  transformers: loading the same checkpoint for the baseline…")
        return warmed(_load_transformers(folder, device, dtype_name))

    if alternate:
        model = load_baseline()
        load["baseline_start"] = load["engine_start"]
        for _ in range(repeats):
            run("engine", engine_once, engine_runs, engine_cpu)
            run("transformers", baseline_once, base_runs, base_cpu)
    else:
        for _ in range(repeats):
            run("engine", engine_once, engine_runs, engine_cpu)
    load["engine_end"] = _load()
    out_tokens = produced[0]
    engine_s = min(engine_runs)
    result = BenchResult(settings, model_name, batch_size, out_tokens, sum(len(p) for p, _ in work), engine_s,
                         out_tokens / engine_s, threads=threads, load=load, engine_runs=engine_runs,
                         cpu_compile_seconds=engine.cpu_compile_seconds if on_cpu else None,
                         weights=running.to_json())
    if on_cpu:
        result.engine_cpu_seconds = engine_cpu[engine_runs.index(engine_s)]
    log(f"  engine        {out_tokens} output tokens in {engine_s:.2f} s = {result.engine_tok_s:.1f} tok/s"
        + (f" (fastest of {repeats})" if repeats > 1 else "")
        + (f" (CPU time {result.engine_cpu_seconds:.2f} s, load average {load['engine_start']:.2f} -> "
           f"{load['engine_end']:.2f})" if on_cpu else ""))

    if with_baseline and not alternate:
        twin = None
        if engine_format_dummy:
            # Random weights exist only in the engine: free its pools, then copy them into transformers.
            from .hf_twin import transformers_same_shapes, transformers_twin

            model_only, config = engine.model, engine.config
            del engine
            gc.collect()
            devices.empty_cache(device)
            import torch

            try:
                twin = transformers_twin(model_only, config, device, getattr(torch, dtype_name))
            except UserError as err:
                del model_only
                gc.collect()
                devices.empty_cache(device)
                log(f"  transformers: the dummy weights cannot be copied ({err}); the baseline runs transformers' "
                    "own random weights of the same shapes (the same work, a different function)")
                model_only = None
                twin = transformers_same_shapes(config, device, getattr(torch, dtype_name))
            del model_only
        else:
            del engine
        gc.collect()
        devices.empty_cache(device)
        if twin is not None:
            model, twin = warmed(twin), None
        else:
            model = load_baseline()
        load["baseline_start"] = _load()
        for _ in range(repeats):
            run("transformers", baseline_once, base_runs, base_cpu)
    elif not alternate:
        del engine
    if with_baseline:
        load["baseline_end"] = _load()
        base_s = min(base_runs)
        result.baseline_runs = base_runs
        result.baseline_seconds, result.baseline_tok_s = base_s, out_tokens / base_s
        if on_cpu:
            result.baseline_cpu_seconds = base_cpu[base_runs.index(base_s)]
        log(f"  transformers  {out_tokens} output tokens in {base_s:.2f} s = {result.baseline_tok_s:.1f} tok/s "
            f"(left-padded batches of {batch_size})" + (f" (fastest of {repeats})" if repeats > 1 else "")
            + (f" (CPU time {result.baseline_cpu_seconds:.2f} s, load average {load['baseline_start']:.2f} -> "
               f"{load['baseline_end']:.2f})" if on_cpu else ""))
        log(f"  ratio         {result.ratio:.2f}x" + (f" (in CPU time {result.cpu_ratio:.2f}x)" if on_cpu else ""))
        del model
    gc.collect()
    devices.empty_cache(device)
    return result
