"""EngineConfig: every setting of the embedded engine in one value, checked once, without torch.

    engine = Engine(EngineConfig("path/to/checkpoint", device="cpu", max_running_requests=4))

`bringup serve` and `bringup bench` build one from their parsed options (`from_args`), the tests
and the bench scripts build one directly, and the GUI's launch renders one as `bringup serve`
arguments (`serve_arguments`), so every way of starting the engine states its settings the same
way and is checked by the same code. Defaults are the engine's facts (facts.py). A number that
cannot work is refused here with the option's name (`--mem-fraction 1.5 must be in (0, 1]`),
before anything is loaded. Run-time hooks that are not settings (the log function, a stand-in for
the device graph in tests) stay arguments of Engine itself.

nano-vllm's `Config` and mini-sglang's `EngineConfig` do the same for their engines.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from bringup.core.errors import UserError

from . import facts

# `bringup serve`'s option for each field it has (the others are set in code only).
SERVE_FLAGS = {
    "device": "--device", "dtype": "--dtype", "load_format": "--load-format", "cpu_threads": "--cpu-threads",
    "cpu_compile": "--cpu-compile", "mem_fraction": "--mem-fraction",
    "max_running_requests": "--max-running-requests", "chunked_prefill_size": "--chunked-prefill-size",
    "mixed_prefill_size": "--mixed-prefill-size",
    "context_length": "--context",
}
# Fields whose command-line name differs from the field's (argparse's dest of the flag).
ARG_NAMES = {"model": "source", "context_length": "context"}


@dataclass(frozen=True)
class EngineConfig:
    model: str | None = None  # checkpoint folder, GGUF file, config.json, catalogue name or hub id
    device: str = "auto"  # one of facts.DEVICES (optionally ":N"), or auto: an accelerator if there is one
    dtype: str = "auto"  # model dtype (facts.DTYPES); auto: the checkpoint's
    load_format: str = "auto"  # auto: the checkpoint's weights; dummy: seeded random weights at full size
    mem_fraction: float | None = None  # share of device memory for weights and pools; None: the planner's
    max_running_requests: int | None = None  # None: as many as the pools hold (the planner's)
    max_total_tokens: int | None = None  # a cap on the KV pool's tokens below the plan's
    context_length: int | None = None  # None: the model's max_position_embeddings
    page_size: int = facts.DEFAULT_PAGE_SIZE
    kv_dtype: str | None = None  # None: the model's dtype
    conv_dtype: str | None = None  # Mamba2 conv state; None: the model's dtype
    ssm_dtype: str = facts.DEFAULT_SSM_DTYPE
    chunked_prefill_size: int | None = None  # prompt tokens per step (the chunk); None: the planner's
    mixed_prefill_size: int | None = None  # ... in a step where requests decode (<= the chunk); None: the planner's
    cuda_graphs: bool | None = None  # decode graphs; None: where the device has them (BRINGUP_CUDA_GRAPHS)
    warmup: bool | None = None  # start-up warm-up; None: on accelerators (BRINGUP_WARMUP)
    cpu_compile: bool | None = None  # CPU decode step through torch.compile; None: on for CPU (BRINGUP_CPU_COMPILE)
    # ... built in a child process while decode steps run eagerly, switched in when ready (serve's auto;
    # background_decode_step.py); False: compiled before the engine takes requests
    cpu_compile_background: bool = False
    cpu_threads: int | None = None  # torch threads on the CPU; None: the cores idle at start, less:
    cpu_cores_reserved: int = 0  # cores left to the process's other threads (serve: 1, its HTTP event loop)
    # Overlapped steps: the host schedules and launches step n+1 before reading step n's tokens, which
    # the device hands from one step to the next (engine.py). None: on for CUDA (BRINGUP_OVERLAP=0/1).
    overlap: bool | None = None
    decode_log_interval: int = 40  # decode steps per "Decode batch" log line (SGLang's); 0: none

    def __post_init__(self) -> None:
        if self.model is not None and not isinstance(self.model, str):
            object.__setattr__(self, "model", str(self.model))  # a Path is fine
        _at_least(self, "page_size", 1)
        _at_least(self, "max_running_requests", 1)
        _at_least(self, "chunked_prefill_size", 1)
        _at_least(self, "mixed_prefill_size", 1)
        _at_least(self, "cpu_threads", 1)
        _at_least(self, "max_total_tokens", 1)
        _at_least(self, "context_length", 2)
        _at_least(self, "decode_log_interval", 0)
        _at_least(self, "cpu_cores_reserved", 0)
        if self.mem_fraction is not None and not 0 < self.mem_fraction <= 1:
            raise UserError(f"{_name('mem_fraction')} {self.mem_fraction:g} must be in (0, 1], e.g. --mem-fraction 0.8")
        # (device and dtype names are checked where they are resolved: device.py, loader.py, pools.py)

    def replace(self, **changes) -> "EngineConfig":
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_args(cls, args, **more) -> "EngineConfig":
        """From a parsed command line (serve's or bench's options; those it lacks keep their defaults)."""
        values = {}
        for f in dataclasses.fields(cls):
            key = ARG_NAMES.get(f.name, f.name)
            if hasattr(args, key):
                values[f.name] = getattr(args, key)
        if isinstance(values.get("cpu_compile"), str):
            values["cpu_compile"] = facts.cpu_compile_choice(values["cpu_compile"])
        values.update(more)
        return cls(**values)

    def serve_arguments(self) -> list[str]:
        """`bringup serve` arguments that start an engine with this config (the options it has; a
        setting left at its default is left out, so the command stays as short as the choice)."""
        if self.model is None:
            raise UserError("the engine config names no model; give a checkpoint, config or catalogue name")
        default = EngineConfig()
        argv = [self.model]
        for key, flag in SERVE_FLAGS.items():
            value = getattr(self, key)
            if value == getattr(default, key):
                continue
            if key == "cpu_compile":
                value = {True: "on", False: "off"}[value]
            argv += [flag, str(value)]
        return argv

    def unsupported_by_serve(self) -> list[str]:
        """The fields set away from their defaults that `bringup serve` has no option for."""
        default = EngineConfig()
        return [f.name for f in dataclasses.fields(self) if f.name not in SERVE_FLAGS and f.name != "model"
                and getattr(self, f.name) != getattr(default, f.name)]


def _name(key: str) -> str:
    """How a message names a field: its `bringup serve` option where there is one."""
    return SERVE_FLAGS.get(key, key)


def _at_least(config: EngineConfig, key: str, low: int) -> None:
    value = getattr(config, key)
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise UserError(f"{_name(key)} {value!r} must be a whole number")
    if value < low:
        raise UserError(f"{_name(key)} {value} must be at least {low}")
