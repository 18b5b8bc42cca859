"""The embedded engine: load a checkpoint, size and allocate the pools once, then step.

    engine = Engine(EngineConfig("/path/to/checkpoint", device="cpu"))
    rid = engine.add_request(engine.tokenizer.encode("Hello"), SamplingParams(max_new_tokens=16))
    while engine.has_unfinished():
        for out in engine.step(): ...

One thread owns an Engine (the server runs it in its loop thread). The work is split as in
nano-vllm: the Scheduler (scheduler.py) keeps the books and finishes requests, the ModelRunner
(model_runner.py) owns the model, the pools' tensors, the decode graphs and sampling, and `step()`
is schedule -> run -> postprocess: one scheduler decision, one model forward over the whole batch
(any mix of prefill chunks and decodes) with one batched sampling call, then the bookkeeping. Pools are sized by the planner's `plan_memory` (the same function the GUI's
Plan tab shows), from the device memory free before the weights were loaded.

Overlapped steps (EngineConfig.overlap; on by default on CUDA, BRINGUP_OVERLAP=0/1): step() queues step
n+1 on the device before it reads step n's tokens, so the host's bookkeeping, the server's hand-out
and the next schedule run while the device computes; one device-to-host copy per step.
"""

from __future__ import annotations

import itertools
import os
import sys
import time
import uuid

import torch

from bringup.core.errors import UserError

from . import device as devices
from . import facts
from .batch_log import BatchLog
from .config import EngineConfig
from .detokenize import IncrementalDetokenizer
from .model_runner import ModelRunner
from bringup.core.sources.gguf_file import is_gguf_path

from .pools import PoolIntegrityError, as_dtype
from .request import Request, RequestRejected, StepOutput
from .sampling import SamplingParams, make_generator
from .scheduler import Scheduler

GB = 1024**3
# Decode graphs are on by default where the device has them (decode_graphs.graphs_supported);
# BRINGUP_CUDA_GRAPHS=0 turns them off, =1 insists on them (an error where the device has none).
CUDA_GRAPHS_ENV = "BRINGUP_CUDA_GRAPHS"
# The start-up warm-up (warmup.py) is on by default on accelerators; BRINGUP_WARMUP=0/1 sets the default.
WARMUP_ENV = "BRINGUP_WARMUP"
# Decode steps compiled with torch.compile on the CPU (cpu_compiled_decode.py): on by default there;
# BRINGUP_CPU_COMPILE=0/1 sets the default that `cpu_compile=None` leaves open.
CPU_COMPILE_ENV = "BRINGUP_CPU_COMPILE"
# Overlapped steps (EngineConfig.overlap): on by default on CUDA; BRINGUP_OVERLAP=0/1 sets the default.
OVERLAP_ENV = "BRINGUP_OVERLAP"
STRATEGY = ("embedded: paged KV pool over full-attention layers, an SWA pool holding only the window of "
            "sliding-window layers, one state slot per request, no radix cache")


PACKED_SHARE = 0.5  # of the memory available at start, for a CPU model's weights and their packed copies


def _env_default(name: str, default: bool) -> bool:
    """A switch's default: the env var's 0 or 1 where set so, else `default` (an explicit argument
    is the caller's to prefer)."""
    env = os.environ.get(name, "").strip()
    return env == "1" if env in ("0", "1") else bool(default)


def default_log(message: str) -> None:
    print(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Engine:
    def __init__(self, config: EngineConfig, *, log=None, graph_factory=None):
        """Load `config.model`, size and allocate the pools, capture or compile the decode step and
        warm up, as `config` says (config.py lists every setting and its default). `log`: where the
        start-up and batch lines go (default: stderr with SGLang's time stamps); `graph_factory`
        stands in for the device graph (the CPU tests of the graph path)."""
        if not isinstance(config, EngineConfig):
            raise TypeError(f"Engine takes an EngineConfig, got {type(config).__name__}; "
                            "write Engine(EngineConfig(model, device=...))")
        self.engine_config = c = config
        model, device, dtype, page_size = c.model, c.device, c.dtype, c.page_size
        self.log = log or default_log
        self.device = devices.resolve_device(device)
        devices.set_current(self.device)
        self.cpu_threads = None
        if self.device.type == "cpu":
            from .cpu_threads import apply_cpu_threads

            self.cpu_threads, why = apply_cpu_threads(c.cpu_threads, c.cpu_cores_reserved)
            self.log(f"CPU threads: {self.cpu_threads} ({why})")
        started = time.monotonic()
        self.startup_seconds: dict[str, float] = {}  # stage -> seconds (load, pools, graphs, compile, warm-up)
        free_before = devices.free_memory(self.device)
        self.log(f"Load weight begin. avail mem={free_before / GB:.2f} GB")
        from .dummy_weights import dummy_tokenizer
        from .loader import load_tokenizer, weights_bytes
        from .model_source import check_load_format, load_model

        self.load_format = check_load_format(c.load_format)
        loaded = load_model(model, device=self.device, dtype=dtype, load_format=self.load_format)
        self.model, self.config, self.folder = loaded.model, loaded.config, loaded.folder
        self.model_name = loaded.name
        if self.folder is not None and is_gguf_path(self.folder):
            from .gguf_weights import release_load_memory

            release_load_memory()  # before the tokenizer and the CPU's copies: the load's peak is not theirs too
        if self.load_format == "dummy":
            self.tokenizer, self.tokenizer_source = dummy_tokenizer(loaded.folder, self.config.get("vocab_size"))
            self.log(f"Dummy weights: seeded random values (text is noise); tokenizer: {self.tokenizer_source}")
        else:
            self.tokenizer, self.tokenizer_source = load_tokenizer(loaded.folder), str(loaded.folder)
        self.dtype = loaded.dtype
        # (the CPU's re-layout below keeps every tensor's size)
        self.weights_bytes = weights_bytes(self.model) + sum(b.numel() * b.element_size() for b in self.model.buffers())
        if self.device.type == "cpu":
            from bringup.kernels.cpu import onednn_packed

            from .cpu_linears import prepare_linears_for_cpu

            # oneDNN's packed copies cost as much memory again as the float32 weights: only when both fit
            # in PACKED_SHARE of the memory found at start (else the products read the plain weights).
            onednn_packed.ENABLED = 2 * self.weights_bytes <= PACKED_SHARE * free_before
            if not onednn_packed.ENABLED:
                self.log(f"CPU: no oneDNN packed weight copies: twice the weights "
                         f"({2 * self.weights_bytes / GB:.2f} GB) would take more than {PACKED_SHARE:.0%} of the "
                         f"{free_before / GB:.2f} GB available")
            prepare_linears_for_cpu(self.model)  # same values; faster products on the CPU (cpu_linears.py)
            from .gguf_weights import prepare_for_cpu

            prepare_for_cpu(self.model)  # GGUF 4-bit blocks in torch's int4 layout (gguf_weights.py)
            if self.folder is not None and is_gguf_path(self.folder):
                from .heap import trim_heap

                trim_heap()  # the dequantised float32 weights' and their packing's temporaries
        self.architecture = (self.config.get("architectures") or [type(self.model).__name__])[0]
        devices.synchronize(self.device)
        self.log(
            f"Load weight end. elapsed={time.monotonic() - started:.2f} s, type={self.architecture}, "
            f"dtype={_name(self.dtype)}, weights={weight_scheme(self.model).label}, "
            f"avail mem={devices.free_memory(self.device) / GB:.2f} GB, "
            f"mem usage={self.weights_bytes / GB:.2f} GB."
        )
        if self.device.type == "cpu":
            self._log_cpu_copies()
        if weight_scheme(self.model).dequantised_from.startswith("GGUF") and dtype in (None, "auto"):
            from bringup.core.layermap.quantization import read_quantization

            from .loader import blocks_not_kept

            why = blocks_not_kept(self.config, read_quantization(self.config), self.device.type)
            if why:  # (dummy weights: random values, never blocks; their own line says so)
                self.log(f"GGUF: the file's blocks were dequantised to {_name(self.dtype)} at load: {why}")

        self.startup_seconds["load"] = time.monotonic() - started
        stage = time.monotonic()
        self.max_context = int(c.context_length or self.config.get("max_position_embeddings") or 0) or None
        # The map the model was built from: the plan sizes the pools the model's layers use.
        self.layer_map = self.model.layer_map
        spec = self.model.cache_spec
        self.kv_dtype = as_dtype(c.kv_dtype) if c.kv_dtype else self.dtype
        self.conv_dtype = as_dtype(c.conv_dtype) if c.conv_dtype else self.dtype
        self.ssm_dtype = as_dtype(c.ssm_dtype)
        self.plan = self._plan(free_before, c)
        kv_tokens = self.plan.kv_tokens
        if c.max_total_tokens is not None:
            kv_tokens = min(kv_tokens, int(c.max_total_tokens))
        num_pages = kv_tokens // page_size if spec.kv_layer_ids else 0
        self.max_running_requests = max(1, int(self.plan.max_running_requests))
        num_slots = int(self.plan.state_slots) if spec.state_layer_ids else self.max_running_requests
        # Prompt tokens per step beside the decode rows: the user's, else the planner's (step_budget.py).
        chunked_prefill_size = int(c.chunked_prefill_size or self.plan.chunked_prefill_size
                                   or facts.DEFAULT_CHUNKED_PREFILL_SIZE)
        # ... and in a step where running requests decode: the plan's (the user's, capped at the chunk).
        mixed_prefill_size = min(chunked_prefill_size, int(self.plan.mixed_prefill_size or chunked_prefill_size))
        swa_pages = self._swa_pages(page_size, chunked_prefill_size)
        graphs = self._graphs_wanted(c.cuda_graphs, graph_factory)
        if graphs:  # the graphs' padding rows get a page and a slot of their own, beyond the plan's
            num_slots += 1
            num_pages += 1 if spec.kv_layer_ids else 0
            swa_pages += 1 if swa_pages else 0

        self.runner = ModelRunner(self.model, device=self.device, num_pages=num_pages, page_size=page_size,
                                  num_slots=num_slots, kv_dtype=self.kv_dtype, conv_dtype=self.conv_dtype,
                                  ssm_dtype=self.ssm_dtype, log=self.log, swa_pages=swa_pages)
        self.kv_pool, self.state_pool = self.runner.kv_pool, self.runner.state_pool
        self.swa_pool = self.runner.swa_pool  # None unless sliding layers sit beside full ones
        self.eos_token_ids = _eos_ids(self.config, self.tokenizer)
        self.scheduler = Scheduler(self.kv_pool, self.state_pool, max_running_requests=self.max_running_requests,
                                   chunked_prefill_size=chunked_prefill_size, mixed_prefill_size=mixed_prefill_size,
                                   max_context=self.max_context,
                                   eos_token_ids=self.eos_token_ids, swa_pool=self.swa_pool)
        self.chunked_prefill_size, self.mixed_prefill_size = chunked_prefill_size, mixed_prefill_size
        self.vocab_size = int(self.config.get("vocab_size") or 0) or None
        self._requests: dict[str, Request] = {}
        self._arrivals = itertools.count()
        self.batch_log = BatchLog(self.log, interval=c.decode_log_interval, device_type=self.device.type,
                                  hybrid=bool(spec.state_layer_ids))
        self._totals = {"requests": 0, "steps": 0}
        self.last_step = None  # the ScheduledStep step() ran last (bench and warm-up read it)
        # On by default on CUDA (H200, Nemotron-3-Nano, 128 decoding: 5,900 -> 6,220 tok/s, the host's
        # ~1 ms per step hidden); the CPU computes as the host calls (nothing to overlap: off unless
        # asked, as the tests do); XPU reads its tokens with a plain copy that waits (off until measured).
        self.overlap = bool(c.overlap) if c.overlap is not None else _env_default(
            OVERLAP_ENV, self.device.type == "cuda")
        self._in_flight = None  # overlapped steps: the Launched step whose tokens are not read yet
        self.log(f"Prompt tokens per step: {mixed_prefill_size:,} beside the running requests' decodes "
                 f"({'--mixed-prefill-size' if c.mixed_prefill_size else 'the planner'}'s choice), "
                 f"{chunked_prefill_size:,} in a step without decodes "
                 f"({'--chunked-prefill-size' if c.chunked_prefill_size else 'the planner'}'s choice)")
        stage = self._stage("pools", stage)
        if graphs:
            self.capture_decode_graphs(graph_factory)
            stage = self._stage("graphs", stage)
        self.cpu_compile_seconds = None
        self.background_decode = None  # CPU: the compiled decode step built beside the serving engine
        if self._cpu_compile_wanted(c.cpu_compile):
            if c.cpu_compile_background:
                self.build_cpu_decode_in_background()
            else:
                self.compile_cpu_decode()
                stage = self._stage("compile", stage)
        self.warmup_report = self.warm_up() if self._warmup_wanted(c.warmup) else None
        if self.warmup_report is not None:
            stage = self._stage("warm-up", stage)
        self.batch_log.restart()
        free_after = devices.free_memory(self.device)
        self.log(f"Memory pool end. avail mem={free_after / GB:.2f} GB")
        self.log("Start-up: " + ", ".join(f"{k} {v:.2f} s" for k, v in self.startup_seconds.items())
                 + f" ({time.monotonic() - started:.1f} s in all)"
                 + _compile_caches(self.device, self.runner.compiled_decode is not None))
        # The server prints SGLang's max_total_num_tokens=... summary line from server_info().

    def _stage(self, name: str, since: float) -> float:
        """Record a start-up stage's seconds (the device drained, so its work counts in its stage)."""
        devices.synchronize(self.device)
        now = time.monotonic()
        self.startup_seconds[name] = now - since
        return now

    @property
    def decode_graphs(self):
        """The captured decode graphs, or None when decode steps run eagerly."""
        return self.runner.decode_graphs

    def _graphs_wanted(self, cuda_graphs, graph_factory) -> bool:
        from .decode_graphs import graphs_supported

        if cuda_graphs is None:
            cuda_graphs = _env_default(CUDA_GRAPHS_ENV, graphs_supported(self.device))
        if cuda_graphs and graph_factory is None and not graphs_supported(self.device):
            raise UserError(f"CUDA graphs need a CUDA device (or an XPU with torch.xpu graphs), not {self.device}; "
                            f"leave cuda_graphs off (unset {CUDA_GRAPHS_ENV})")
        return bool(cuda_graphs)

    def capture_decode_graphs(self, graph_factory=None):
        """Decode steps replayed from device graphs, one per batch-size bucket, padding rows in one
        reserved KV page and state slot (see decode_graphs.py). Done at start-up, where the pools
        were given that page and slot beyond the plan: taking them from the plan's own would leave
        room for only N-1 of N running requests (and none at --max-running-requests 1)."""
        from .decode_graphs import PADDING_OWNER

        if self.state_pool.layer_ids and self.state_pool.num_free_slots - 1 < self.scheduler.max_running:
            raise UserError("the decode graphs' padding slot would leave fewer state slots than "
                            f"max_running_requests={self.scheduler.max_running}; capture them at start-up "
                            "(EngineConfig(..., cuda_graphs=True)), which allocates the slot beyond the plan")
        pages, (slot,) = self.scheduler.reserve(PADDING_OWNER, 1 if self.scheduler.uses_kv else 0, 1)
        swa = self.scheduler.reserve_swa(PADDING_OWNER, 1)  # [] without an SWA pool
        before = devices.free_memory(self.device)
        graphs = self.runner.capture_decode_graphs(max_batch=self.scheduler.max_running,
                                                   max_context=self.max_context,
                                                   scratch_page=pages[0] if pages else 0, scratch_slot=slot,
                                                   scratch_swa_page=swa[0] if swa else None,
                                                   graph_factory=graph_factory)
        self.graph_memory_bytes = max(0, before - devices.free_memory(self.device))
        self.log(f"Decode graphs: {len(graphs.buckets)} batch sizes up to {graphs.buckets[-1]}, "
                 f"captured in {graphs.capture_seconds:.2f} s, graph memory {self.graph_memory_bytes / GB:.2f} GB")
        return graphs

    def _cpu_compile_wanted(self, cpu_compile: bool | None) -> bool:
        if self.device.type != "cpu":
            if cpu_compile:
                raise UserError(f"--cpu-compile on is for CPU engines; {self.device} decodes through its graphs "
                                "(use --cpu-compile auto or off)")
            return False
        if cpu_compile is not None:
            return bool(cpu_compile)
        return _env_default(CPU_COMPILE_ENV, True)

    def compile_cpu_decode(self) -> float | None:
        """Compile the CPU's decode step now (cpu_compiled_decode.py), logging how long it took; a
        failure (no C++ compiler, an op torch cannot trace) is logged and decode steps stay eager."""
        self.log(f"CPU: compiling the decode step with torch.compile for 1 to {self.scheduler.max_running} requests "
                 "(a minute or more the first time, seconds once saved; --cpu-compile off or "
                 f"{CPU_COMPILE_ENV}=0 skips it)")
        from .cpu_compiled_decode import error_summary

        try:
            seconds = self.runner.compile_decode(self.scheduler.max_running)
        except Exception as err:  # noqa: BLE001 - any compile failure leaves the eager step, which works
            self.runner.compiled_decode = None
            self.log(f"CPU: compiling the decode step failed ({error_summary(err)}); decode steps run eagerly")
            return None
        self.cpu_compile_seconds = seconds
        how, phases = self.runner.compiled_decode.how, self.runner.compiled_decode.phases
        self.log(f"CPU: decode step {'loaded' if how.startswith('loaded') else 'compiled'} in {seconds:.2f} s: "
                 f"{how}{f' ({phases})' if phases else ''} (batch size and context length dynamic)")
        return seconds

    def build_cpu_decode_in_background(self):
        """Decode eagerly now; build the compiled step in a child process (or load the one a former
        start saved) and switch to it between two steps (background_decode_step.py)."""
        from bringup.kernels.cpu import onednn_packed

        from .background_decode_step import BackgroundDecodeStep
        from .saved_decode_step import step_key, steps_dir, use_bringup_inductor_cache

        threads = torch.get_num_threads()  # the compiled step's (the build's key and code depend on it)
        key = step_key(self.model, self.kv_pool, self.state_pool)
        path = steps_dir(use_bringup_inductor_cache()) / f"{key}.bin"
        kv, st = self.kv_pool, self.state_pool
        pools = {"num_pages": kv.num_pages, "page_size": kv.page_size, "num_slots": st.num_slots,
                 "swa_pages": self.swa_pool.num_pages if self.swa_pool is not None else 0,
                 "kv_dtype": _name(self.kv_dtype), "conv_dtype": _name(self.conv_dtype),
                 "ssm_dtype": _name(self.ssm_dtype)}
        spec = {"model": self.engine_config.model, "dtype": self.engine_config.dtype, "load_format": self.load_format,
                "onednn_packed": bool(onednn_packed.ENABLED), "threads": threads, "key": key, "path": str(path),
                "max_batch": self.scheduler.max_running, "pools": pools}
        build = self.background_decode = BackgroundDecodeStep(self.runner, spec, threads=threads, log=self.log)
        if build.state == "building":
            self.log(f"CPU: {build.describe()}: a child process compiles it on one core into {path} "
                     f"(a minute or more the first time); the engine steps with {build.info()['threads_while_building']} "
                     "thread(s) meanwhile and switches between two steps")
        elif build.state == "loading":
            self.log(f"CPU: {build.describe()} from {path} (a thread loads it; the engine switches between two steps)")
        return build

    def between_steps(self) -> None:
        """Work done between two steps: the CPU's compiled decode step switched in once it is ready."""
        build = self.background_decode
        if build is not None and build.state in ("building", "loading"):
            build.poll()

    def decode_step_words(self) -> str | None:
        """What the CPU's decode steps are now, for the ready line; None on other devices."""
        if self.device.type != "cpu":
            return None
        if self.background_decode is not None:
            return self.background_decode.describe()
        return "compiled decode step" if self.runner.compiled_decode is not None else "eager decode steps"

    def close(self) -> None:
        """End what the engine started beside it (the CPU's decode step build); the engine still steps."""
        if self.background_decode is not None:
            self.background_decode.stop()

    def _warmup_wanted(self, warmup: bool | None) -> bool:
        """As for graphs: an explicit argument wins; the env var sets the default it leaves open."""
        if warmup is not None:
            return bool(warmup)
        return _env_default(WARMUP_ENV, self.device.type in ("cuda", "xpu"))

    def warm_up(self):
        """Prompt and mixed steps at the chunk size, then decodes, before any request: their
        one-time costs (Triton compiles and autotunes, the allocator's first segments) are paid
        here and logged, not by the first requests (warmup.py). Returns the WarmupReport."""
        from .compile_cache import cached_kernels, describe_compiles
        from .warmup import plan_warmup, run_warmup

        sch = self.scheduler
        plan = plan_warmup(chunk=sch.token_budget, max_context=self.max_context, max_running=sch.max_running,
                           kv_tokens=self.kv_pool.num_free_pages * self.kv_pool.page_size if sch.uses_kv else None,
                           page_size=self.kv_pool.page_size)
        if plan is None:
            self.log("Warm-up: skipped (the pools hold no warm-up prompt)")
            return None
        before = cached_kernels()
        report = run_warmup(self, plan)
        devices.synchronize(self.device)
        self.log(report.describe(sch.token_budget) + "; " + describe_compiles(before, cached_kernels()))
        return report

    def _swa_pages(self, page_size: int, chunked_prefill_size: int | None) -> int:
        """SWA pages: the plan's tokens, and at least what one request's first chunk and window need."""
        from .model_runner import uses_swa_pool

        spec = self.model.cache_spec
        if not uses_swa_pool(spec):
            return 0
        per_request = -(-self.plan.swa_tokens // page_size) if self.plan.swa_tokens else 0
        chunk = chunked_prefill_size or self.max_context or 0
        least = -(-(spec.sliding_window - 1 + chunk) // page_size) + 1
        return max(per_request, least)

    def _plan(self, free_before, c: EngineConfig):
        from bringup.core.planner import plan_memory

        budgets = {key: getattr(c, key) for key in ("chunked_prefill_size", "mixed_prefill_size") if getattr(c, key)}
        plan = plan_memory(
            self.layer_map, device_memory=int(free_before), target="embedded", device=self.device.type,
            mem_fraction=c.mem_fraction, dtype=_name(self.dtype), kv_dtype=_name(self.kv_dtype),
            conv_dtype=_name(self.conv_dtype), ssm_dtype=_name(self.ssm_dtype), page_size=c.page_size,
            context=c.context_length, max_running_requests=c.max_running_requests, weights_bytes=self.weights_bytes,
            **budgets,
        )
        if getattr(plan, "problems", None):
            raise UserError("cannot size the engine's pools: " + "; ".join(plan.problems))
        for note in getattr(plan, "notes", ()) or ():
            self.log(f"Planner: {note}")
        if plan.max_running_requests < 1:
            raise UserError("the pools have room for no request at all; give the engine more memory (--mem-fraction)")
        return plan

    # Requests ---------------------------------------------------------------------------------
    def add_request(self, prompt_ids, params: SamplingParams | None = None, request_id: str | None = None, *,
                    detokenize: bool = True) -> str:
        """Queue a request; raises RequestRejected (a ValueError) when it can never run."""
        params = params or SamplingParams()
        if not isinstance(params, SamplingParams):
            raise TypeError(f"params must be SamplingParams, got {type(params).__name__}")
        ids = _token_list(prompt_ids, self.vocab_size)
        rid = str(request_id) if request_id is not None else uuid.uuid4().hex
        if rid in self._requests:
            raise RequestRejected(f"request id {rid!r} is already in use; use a fresh id")
        detok = IncrementalDetokenizer(self.tokenizer, ids, params.stop) if detokenize or params.stop else None
        req = Request(rid, ids, params, next(self._arrivals), make_generator(params.seed, self.device), detok)
        self.scheduler.add(req)  # raises RequestRejected for a prompt that can never fit
        self._requests[rid] = req
        self._totals["requests"] += 1
        return rid

    def abort(self, request_id: str) -> bool:
        """End a request now, freeing its pages and slot; its last output (finish_reason "abort")
        comes with the next step. False if the request is unknown or already finished."""
        req = self._requests.get(request_id)
        if req is None or req.is_finished:
            return False
        self.scheduler.finish(req, "abort")
        return True

    def has_unfinished(self) -> bool:
        return bool(self._requests) or self._in_flight is not None

    # One step ---------------------------------------------------------------------------------
    def step(self) -> list[StepOutput]:
        """schedule -> run -> postprocess: the scheduler picks the work, the runner computes and
        samples it, the scheduler records it and finishes requests; then what each request got.

        Overlapped (EngineConfig.overlap): schedule step n+1 and queue it on the device first, then
        read step n's tokens (the device runs n+1 meanwhile) and finish requests: outputs come a call
        later, the first step returns none. Step n+1's decode rows read step n's tokens on the device
        (the scheduler's FUTURE placeholders); a request that turns out to have stopped at step n
        has one wasted row in n+1, dropped."""
        self.between_steps()
        if self.overlap:
            return self._step_overlapped()
        started = time.monotonic()
        step = self.last_step = self.scheduler.schedule()
        reported = []
        if step.requests:
            prefill = step.prefill()  # before postprocess records the step
            tokens = self.runner.run(step)
            reported = self.scheduler.postprocess(step, tokens)
            self._totals["steps"] += 1
            self._log_step(step, _prefill_counts(prefill), started, self.runner.last_step_graphed)
        return self._outputs(reported)

    def _step_overlapped(self) -> list[StepOutput]:
        step = self.last_step = self.scheduler.schedule()
        launched = None
        if step.requests:
            prefill, sampled = step.prefill(), step.samples()
            launched = self.runner.launch(step, sampled)
            self.scheduler.launched(step, sampled)
            launched.prefill = _prefill_counts(prefill)
            self._totals["steps"] += 1
        previous, self._in_flight = self._in_flight, launched
        reported = []
        if previous is not None:
            tokens = self.runner.resolve(previous)
            reported = self.scheduler.resolve(previous.step, previous.sampled, tokens)
            self._log_step(previous.step, previous.prefill, previous.started, previous.graphed)
        return self._outputs(reported)

    def _log_step(self, step, prefill: tuple[int, int], started: float, graphed: bool) -> None:
        new_seqs, prefill_tokens = prefill
        self.batch_log.after_step(
            new_seqs=new_seqs, prefill_tokens=prefill_tokens,
            decode_tokens=step.num_tokens - prefill_tokens, seconds=time.monotonic() - started, stats=self.stats(),
            graphed=graphed)

    def _outputs(self, reported: list[Request]) -> list[StepOutput]:
        seen = {r.id for r in reported}
        reported += [r for r in self.scheduler.take_ended() if r.id not in seen]
        return [self._output(r) for r in reported]

    def _output(self, req: Request) -> StepOutput:
        finished = req.is_finished
        text = req.detokenizer.take(final=finished) if req.detokenizer is not None else ""
        tokens, req.pending_tokens = req.pending_tokens, []
        logprobs = None
        if req.params.logprobs is not None:
            logprobs, req.pending_logprobs = req.pending_logprobs[:len(tokens)], req.pending_logprobs[len(tokens):]
        if finished:
            self._requests.pop(req.id, None)
        return StepOutput(req.id, tokens, text, finished, req.finish_reason, len(req.prompt_ids),
                          len(req.output_ids), req.error, logprobs)

    # Whole batches ----------------------------------------------------------------------------
    def generate(self, prompts, params: SamplingParams | list[SamplingParams] | None = None) -> list[list[int]]:
        """Run prompts (lists of token ids) to completion together; their generated ids, in order."""
        if self.has_unfinished():
            raise RuntimeError("generate() runs the engine for its own prompts only; other requests are in flight "
                               "(use add_request and step, or wait for them to finish)")
        prompts = list(prompts)
        plist = params if isinstance(params, list) else [params or SamplingParams()] * len(prompts)
        if len(plist) != len(prompts):
            raise ValueError(f"{len(prompts)} prompts but {len(plist)} sampling params")
        ids = [self.add_request(p, sp, detokenize=False) for p, sp in zip(prompts, plist)]
        results: dict[str, list[int]] = {rid: [] for rid in ids}
        pending = set(ids)
        while pending:
            for out in self.step():
                if out.request_id in results:
                    results[out.request_id] += out.token_ids
                    if out.finished:
                        pending.discard(out.request_id)
        return [results[rid] for rid in ids]

    # Introspection ----------------------------------------------------------------------------
    def stats(self) -> dict:
        kv, st, sch = self.kv_pool, self.state_pool, self.scheduler
        # What the requests can use: the graphs' padding page and slot lie beyond the plan, so an
        # idle engine reads 0 used and the totals are the plan's.
        pages_reserved, slots_reserved = sch.num_reserved
        return {
            "kv_tokens_used": sch.kv_tokens_used,
            "kv_tokens_total": kv.capacity_tokens - pages_reserved * kv.page_size,
            "kv_pages_used": kv.num_used_pages - pages_reserved,
            "kv_pages_total": kv.num_pages - pages_reserved,
            "state_slots_used": st.num_used_slots - slots_reserved,
            "state_slots_total": st.num_slots - slots_reserved,
            "num_running": len(sch.running),
            "num_queued": len(sch.waiting),
            "prompt_tokens_total": sch.totals["prompt"],
            "generated_tokens_total": sch.totals["generated"],
            "recomputed_tokens_total": sch.totals["recomputed"],
            "requests_total": self._totals["requests"],
            "steps_total": self._totals["steps"],
            "preemptions_total": sch.num_preemptions,
            "swa_tokens_used": sch.swa_tokens_used,
            "swa_tokens_total": (self.swa_pool.capacity_tokens - sch.num_reserved_swa * self.swa_pool.page_size
                                 if self.swa_pool is not None else 0),
            "swa_evicted_tokens_total": sch.swa_evicted_pages * kv.page_size,
        }

    def server_info(self) -> dict:
        from .loader import parameter_count

        plan = self.plan
        kv, st = self.kv_pool, self.state_pool
        return {
            "model": self.model_name,
            "model_path": str(self.folder) if self.folder else None,
            "architecture": self.architecture,
            "model_type": self.config.get("model_type"),
            "load_format": self.load_format,
            # What the weights are: the checkpoint's, or seeded random values at the real size.
            "weights_source": "dummy (seeded random)" if self.load_format == "dummy" else "checkpoint",
            "tokenizer_source": self.tokenizer_source,
            "params": parameter_count(self.model),
            "decode_graphs": list(self.decode_graphs.buckets) if self.decode_graphs is not None else None,
            "graph_memory_bytes": getattr(self, "graph_memory_bytes", 0),
            # CPU: seconds spent compiling the decode step at start-up, None when its steps run eagerly.
            "cpu_compiled_decode_seconds": (round(self.cpu_compile_seconds, 3) if self.runner.compiled_decode
                                            is not None and self.cpu_compile_seconds is not None else None),
            # CPU: which decode step runs now ("compiled" or "eager"), and the build beside the engine.
            "cpu_decode_step": (None if self.device.type != "cpu"
                                else "compiled" if self.runner.compiled_decode is not None else "eager"),
            "cpu_decode_build": self.background_decode.info() if self.background_decode is not None else None,
            "warmup_seconds": round(self.warmup_report.seconds, 3) if self.warmup_report is not None else None,
            "startup_seconds": {k: round(v, 3) for k, v in self.startup_seconds.items()},
            "device": str(self.device),
            "device_name": devices.device_name(self.device),
            "cpu_threads": self.cpu_threads,
            "dtype": _name(self.dtype),
            # The weight scheme running (fp8 as stored, or the model dtype; `dequantised_from` when an
            # explicit --dtype dequantised a quantized checkpoint), with the kernels that read it.
            "weights": weight_scheme(self.model).to_json(),
            "kv_dtype": _name(self.kv_dtype),
            "conv_dtype": _name(self.conv_dtype),
            "ssm_dtype": _name(self.ssm_dtype),
            "strategy": STRATEGY,
            "page_size": kv.page_size,
            "chunked_prefill_size": self.chunked_prefill_size,
            "mixed_prefill_size": self.mixed_prefill_size,  # prompt tokens in a step with decodes
            "context_len": self.max_context,
            "max_running_requests": self.max_running_requests,
            "vocab_size": self.vocab_size,
            "kv_layers": list(kv.layer_ids),
            "state_layers": list(st.layer_ids),
            "swa_layers": list(self.swa_pool.layer_ids) if self.swa_pool is not None else [],
            "sliding_window": self.swa_pool.window if self.swa_pool is not None else None,
            "predicted": {
                "weights_bytes": plan.weights_bytes,
                "kv_bytes_per_token": plan.kv_bytes_per_token,
                "state_bytes_per_request": plan.state_bytes_per_request,
                "kv_tokens": plan.kv_tokens,
                "swa_tokens": plan.swa_tokens,
                "state_slots": plan.state_slots,
                "max_running_requests": plan.max_running_requests,
                "bottleneck": plan.bottleneck,
                "mem_fraction": plan.mem_fraction,
                "device_memory": plan.device_memory,
                "context": plan.context,
            },
            "allocated": {
                "weights_bytes": self.weights_bytes,
                "packed_weights_bytes": self.packed_weights_bytes_now(),
                "kv_bytes_per_token": kv.bytes_per_token,
                "state_bytes_per_request": st.bytes_per_slot,
                "kv_tokens": kv.capacity_tokens,
                "kv_pages": kv.num_pages,
                "swa_tokens": self.swa_pool.capacity_tokens if self.swa_pool is not None else 0,
                "k_bytes": kv.k_bytes,
                "v_bytes": kv.v_bytes,
                "state_slots": st.num_slots,
                "conv_bytes": st.conv_bytes,
                "ssm_bytes": st.ssm_bytes,
                "max_running_requests": self.max_running_requests,
            },
        }

    def _log_cpu_copies(self) -> None:
        """What the CPU's copies of the weights add: oneDNN's packed copies of the plain linears, a GGUF
        model's CPU forms (packed_weights_bytes_now counts both)."""
        from bringup.kernels.cpu.onednn_packed import packed_bytes

        from .gguf_weights import copies_held, cpu_copies_bytes

        packed, gguf = packed_bytes(self.model), cpu_copies_bytes(self.model)
        if packed:  # cpu_linears.py
            self.log(f"CPU: oneDNN packed copies of the linear weights, {packed / GB:.2f} GB more (products of a "
                     "few rows and more read them; the MoE's are made at its first wide batch)")
        if gguf:  # gguf_weights.py: prepare_for_cpu
            self.log(f"CPU: GGUF layers' copies of their weights ({copies_held(self.model)}), {gguf / GB:.2f} GB "
                     "more than their blocks")

    def packed_weights_bytes_now(self) -> int:
        """The packed weight copies the model holds now (the CPU's; the MoE's come with its first wide batch;
        a kept GGUF model's float32 output projection)."""
        if self.device.type != "cpu":
            return 0
        from bringup.kernels.cpu.onednn_packed import packed_bytes

        from .gguf_weights import cpu_copies_bytes

        return packed_bytes(self.model) + cpu_copies_bytes(self.model)

    def check_pools(self) -> None:
        """Raise PoolIntegrityError if a page or slot is owned twice, owned by nobody, or (with no
        request running) still held."""
        self.scheduler.check()
        pages_reserved, slots_reserved = self.scheduler.num_reserved
        held_pages = self.kv_pool.num_used_pages - pages_reserved
        held_slots = self.state_pool.num_used_slots - slots_reserved
        held_swa = self.swa_pool.num_used_pages - self.scheduler.num_reserved_swa if self.swa_pool is not None else 0
        if not self.scheduler.running and (held_pages or held_slots or held_swa):
            raise PoolIntegrityError(
                f"no request is running but {held_pages} KV page(s), {held_swa} SWA page(s) and {held_slots} "
                "state slot(s) are held"
            )


def weight_scheme(model):
    """What the model's weights run as (quantized.RunningScheme; build_model sets it)."""
    from .quantized import RunningScheme

    return getattr(model, "weight_scheme", None) or RunningScheme(_name(model.dtype))


def _prefill_counts(prefill) -> tuple[int, int]:
    """(new sequences, prompt tokens) of a step's prefill work, once the step is recorded."""
    return sum(1 for r, n in prefill if r.num_computed == n), sum(n for _, n in prefill)


def _compile_caches(device, cpu_compiled: bool) -> str:
    """Where this start's compiled kernels are kept for the next one: inductor's on-disk cache (the
    CPU's compiled decode step), Triton's (the GPU kernels); a second start of the same model reuses them."""
    if device.type == "cpu":
        if not cpu_compiled:  # eager steps compiled nothing; importing inductor to say where cost 69 MiB
            return ""
        from torch._inductor.runtime.cache_dir_utils import cache_dir

        return f"; inductor's cache {cache_dir()} (a second start reuses it)"
    try:
        import triton
    except ImportError:
        return ""
    knobs = getattr(triton, "knobs", None)  # triton >= 3.4 states its cache folder there
    folder = (getattr(getattr(knobs, "cache", None), "dir", None) or os.environ.get("TRITON_CACHE_DIR")
              or os.path.join(os.path.expanduser("~"), ".triton", "cache"))
    return f"; Triton's cache {folder} (a second start reuses it)"


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _token_list(prompt_ids, vocab_size: int | None) -> list[int]:
    try:
        ids = [int(t) for t in prompt_ids]
    except (TypeError, ValueError):
        raise RequestRejected("the prompt must be a list of token ids (integers)") from None
    if vocab_size:
        bad = [t for t in ids if not 0 <= t < vocab_size]
        if bad:
            raise RequestRejected(
                f"token id {bad[0]} is outside the vocabulary (0..{vocab_size - 1}); "
                "encode the prompt with this model's tokenizer"
            )
    return ids


def _eos_ids(config: dict, tokenizer) -> frozenset[int]:
    ids: set[int] = set()
    for value in (config.get("eos_token_id"), getattr(tokenizer, "eos_token_id", None)):
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(int(v) for v in value)
    return frozenset(ids)
