"""The differential matrix's cells, and how one cell's oracle record is set against `bringup validate`.

Imported by the matrix runner (tools/oracle/matrix.py) and by the suite (tests/tools/test_oracle_table.py),
so the committed table is judged by the same rule that produced it.

Pruning (what the matrix leaves out, and why):
- every backend of the device (core/rules/sglang_backends.BACKENDS) x every strategy for one hybrid of each
  kind of state (FULL); the other models on the default backend only; the models without state get only
  auto and --disable-radix-cache (the strategy flags have nothing to act on there);
- page size 64 only on the default backend with auto (the snaps that matter are backend-driven: intel_xpu,
  trtllm_mha; a page size on other backends is passed through unchanged in every release);
- TP/PP, dtypes (bfloat16, float16), the SSM dtype, the linear-attention backend and the overlap switch only
  on the default backend with auto, on cuda-hopper and xpu, for every model (their rules do not depend on
  the backend in the rules read);
- the Run tab's own additions (where to listen, /metrics, the layer dump folder: `Launch.argv(endpoint=...)`)
  as more such extras: "run" on the validated device, "run_auto" on the Run tab's device "auto" (no
  --device), so every flag either builder can write meets the release's parser.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, fields

# The oracle's device targets -> LaunchSettings(device, gpu, xmx).
DEVICES = {
    "cuda-hopper": ("cuda", "hopper", None), "cuda-blackwell": ("cuda", "blackwell", None), "rocm": ("rocm", None, None),
    "xpu": ("xpu", None, True), "npu": ("npu", None, None), "cpu": ("cpu", None, None),
}
STRATEGIES = ("auto", "no_buffer", "extra_buffer", "extra_buffer_lazy", "disabled")
EXTRAS = {  # name -> LaunchSettings changes (default backend, auto)
    "page64": {"page_size": 64}, "tp2": {"tp": 2}, "pp2": {"pp": 2}, "kv_fp8": {"kv_dtype": "fp8_e4m3"},
    "bf16": {"dtype": "bfloat16"}, "fp16": {"dtype": "float16"}, "no_overlap": {"disable_overlap_schedule": True},
    "ssm_f32": {"mamba_ssm_dtype": "float32"}, "linear_triton": {"linear_attn_backend": "triton"}, "run": {},
    "run_auto": {},
}
# The "run" extra: the command line as the Run tab starts it (core/launch/launch.py Launch.argv with an
# endpoint; app/run/engine_controller.py), with SGLang's layer dump on (app/tabs/run_tab.py "Dump layers");
# "run_auto": the same on the Run tab's device "auto", where SGLang is given no --device and finds it itself.
RUN_ENDPOINT = ("127.0.0.1", 30000)
RUN_DUMP_FOLDER = "/tmp/bringup-oracle-dump"
# What the release's parser must have read from the flags only an extra writes: ServerArgs field -> value.
PARSED = {
    "run": {"host": RUN_ENDPOINT[0], "port": RUN_ENDPOINT[1], "enable_metrics": True,
            "debug_tensor_dump_output_folder": RUN_DUMP_FOLDER},
    "ssm_f32": {"mamba_ssm_dtype": "float32"}, "linear_triton": {"linear_attn_backend": "triton"},
}
# Settings the oracle can tell apart from the validator's Resolved, and where each is in ServerArgs.
COMPARED = ("attention_backend", "page_size", "mamba_strategy", "overlap_schedule", "radix_cache", "slots_per_request",
            "chunked_prefill_size")
REACHABLE_STAGES = (None, "", "arguments")  # the validator's stages the oracle's reach covers


class JoinedKey:
    """A cell key whose table id is its fields joined by '|' (both engines' cells)."""

    @property
    def id(self) -> str:
        return "|".join(getattr(self, f.name) for f in fields(self))

    @classmethod
    def parse(cls, text: str):
        return cls(*text.split("|"))


def target_settings(device: str, backend: str) -> dict:
    """The LaunchSettings fields of an oracle target and a backend ("default": the engine's own choice)."""
    kind, gpu, xmx = DEVICES[device]
    return dict(device=kind, gpu=gpu, xmx=xmx, attention_backend=None if backend == "default" else backend)


@dataclass(frozen=True)
class CellKey(JoinedKey):
    model: str  # file name under ../shared/models, without .json
    device: str  # an oracle target (DEVICES)
    backend: str  # "default" or an --attention-backend
    strategy: str  # STRATEGIES
    extra: str = ""  # "" or a key of EXTRAS


def launch_argv(result, key, version: str) -> list[str]:
    """The command line a cell runs: Validate's Command section (`result.argv`), or for the "run" extra the
    Run tab's (the same Launch with an endpoint, and for SGLang the layer dump of `version`)."""
    if key.extra not in ("run", "run_auto"):
        return result.argv
    from bringup.core.launch.launch import Endpoint

    launch = result.launch
    if launch.engine == "sglang":
        launch = launch.with_(tensor_dump=RUN_DUMP_FOLDER, engine_version=version)
    if key.extra == "run_auto":
        launch = launch.with_(device="auto")
    return launch.argv(endpoint=Endpoint(*RUN_ENDPOINT))


def parsed_disagreements(expected: dict | None, seen: dict) -> list[str]:
    """The flags only an extra writes, as the release's parser read them (seen["parsed"]) against what the
    builder meant (PARSED)."""
    if not expected or not seen.get("accepted"):
        return []
    got = seen.get("parsed") or {}
    return [f"{k}: engine parsed {got.get(k)!r}, builder meant {v!r}" for k, v in expected.items() if got.get(k) != v]


def settings_for(key: CellKey):
    from bringup.core.rules.settings import LaunchSettings

    kw = target_settings(key.device, key.backend)
    if key.strategy == "disabled":
        kw["disable_radix_cache"] = True
    elif key.strategy != "auto":
        kw["mamba_strategy"] = key.strategy
        kw["disable_overlap_schedule"] = key.strategy == "no_buffer"  # the flag no_buffer asserts on
    kw.update(EXTRAS.get(key.extra, {}))
    return LaunchSettings(**kw)


# One model per kind of state (Mamba2, gated DeltaNet, short conv, parallel Mamba2, KDA) gets every
# backend x strategy; the others get every strategy on the default backend.
FULL = ("nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B", "Qwen__Qwen3-Next-80B-A3B-Instruct", "LiquidAI__LFM2-2.6B",
        "tiiuae__Falcon-H1-0.5B", "moonshotai__Kimi-Linear-48B-A3B-Instruct")
EXTRA_DEVICES = ("cuda-hopper", "xpu")  # the extras run on the two targets the project serves first


def keys_for(models: dict[str, bool]) -> list[CellKey]:
    """models: name -> whether it keeps recurrent state."""
    from bringup.core.rules.sglang_backends import BACKENDS

    out = []
    for model, hybrid in models.items():
        for device, (kind, _gpu, _xmx) in DEVICES.items():
            for backend in ("default", *BACKENDS[kind]) if model in FULL else ("default",):
                for strategy in STRATEGIES if hybrid else ("auto", "disabled"):
                    out.append(CellKey(model, device, backend, strategy))
            if device in EXTRA_DEVICES:
                out += [CellKey(model, device, "default", "auto", extra) for extra in EXTRAS]
    return out


def predicted(result, profile, memory_mib: int | None, key: CellKey | None = None) -> dict:
    """What the validator says about one cell, in the table's terms (with `key`: what its extra's flags
    must parse to)."""
    r = result.resolved
    first = result.first_error
    reach = next((f for f in result.findings if f.is_error and f.stage in REACHABLE_STAGES), None)
    out = {"verdict": result.verdict, "first_error": first.code if first else None,
           "first_error_stage": first.stage if first else None,
           "reachable_error": reach.code if reach else None,
           "reachable_message": (reach.engine_message or reach.message) if reach else None,
           "attention_backend": r.attention_backend, "page_size": r.page_size,
           "mamba_strategy": r.mamba_strategy, "overlap_schedule": r.overlap_schedule, "radix_cache": r.radix_cache,
           "slots_per_request": r.state_slots_per_request}
    if profile is not None and memory_mib:
        out["chunked_prefill_size"] = profile.capacity_defaults(memory_mib, result.settings.tp)[0]
    else:
        out["chunked_prefill_size"] = None
    out["parsed"] = PARSED.get(key.extra) if key is not None else None
    if key is not None and key.extra == "run_auto":  # the device SGLang found is the target's
        from bringup.core.rules.sglang_backends import SGLANG_DEVICE

        kind = DEVICES[key.device][0]
        out["parsed"] = {**PARSED["run"], "device": SGLANG_DEVICE.get(kind, kind)}
    return out


def observed(oracle: dict) -> dict:
    """The oracle's record of one cell, in the table's terms (None where it was not accepted)."""
    if not oracle.get("accepted"):
        return {"accepted": False, "error": oracle.get("error"), "where": oracle.get("where")}
    a = oracle["resolved"]
    slots = oracle.get("slots_per_request")
    strategy = a.get("mamba_radix_cache_strategy")
    parsed = {"parsed": oracle["parsed"]} if oracle.get("parsed") else {}
    return {**parsed, "accepted": True, "attention_backend": a.get("attention_backend"), "page_size": a.get("page_size"),
            "mamba_strategy": strategy, "overlap_schedule": not a.get("disable_overlap_schedule"),
            "radix_cache": not a.get("disable_radix_cache"), "slots_per_request": slots if isinstance(slots, int) else None,
            "chunked_prefill_size": a.get("chunked_prefill_size"),
            "max_running_requests": a.get("max_running_requests")}


def disagreements(pred: dict, seen: dict, hybrid: bool) -> list[str]:
    """What the two say differently about one cell; [] when they agree."""
    if not seen["accepted"]:
        if pred["reachable_error"] is None:
            return [f"engine refused ({seen['error']!r} at {seen['where']}); validator has no argument-stage error"]
        # the engine's exception text without its class (AssertionError, ValueError, NotImplementedError...)
        text = re.sub(r"^\w+(?:Error|Exception): ", "", pred["reachable_message"] or "")
        if text and text.split("{")[0][:40] not in (seen["error"] or ""):
            return [f"both refuse, but the engine says {seen['error']!r}, validator {pred['reachable_message']!r}"]
        return []
    if pred["reachable_error"] is not None:
        return [f"engine accepted; validator stops at arguments on {pred['reachable_error']}"]
    out = parsed_disagreements(pred.get("parsed"), seen)
    for name in COMPARED:
        mine, theirs = pred.get(name), seen.get(name)
        if name == "mamba_strategy" and (not hybrid or not pred["radix_cache"] or mine is None):
            continue  # the engine keeps the flag's value; without a mamba radix cache it means nothing
        if name == "slots_per_request" and (not hybrid or mine is None or theirs is None):
            continue
        if name == "chunked_prefill_size" and mine is None:
            continue
        if mine != theirs:
            out.append(f"{name}: engine {theirs!r}, validator {mine!r}")
    return out


def table_argv(argv: list[str]) -> str:
    """The launch arguments as the table keeps them: without the model folder (a temporary path) and the
    oracle's own --skip-tokenizer-init."""
    out, skip = [], False
    for i, a in enumerate(argv):
        if skip:
            skip = False
            continue
        if a == "--model-path":
            skip = True
            continue
        if a != "--skip-tokenizer-init":
            out.append(a)
    return " ".join(out)


def dumps_row(row: dict) -> str:
    return json.dumps(row, sort_keys=True, separators=(",", ":"))
