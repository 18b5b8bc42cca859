"""The child process that builds a serving engine's compiled CPU decode step (background_decode_step.py).

    python -m bringup.core.engine.decode_step_build SPEC.json

It loads the server's model the way the server did, builds pools of the server's shapes, and
compiles and saves the decode step (cpu_compiled_decode.py, saved_decode_step.py) to the file the
server will load: the saved step's key covers the model, the pools and the thread count, so the
child checks that its key is the server's before it spends a minute on a step nobody could load.
It writes what happened to SPEC's "result" file as JSON ({"ok": ..., "how"/"error": ...}).

It ends with its parent: the server holds the write end of the child's stdin, which the kernel
closes when the server exits however it exits (SIGKILL included); at end of file the child kills
its own process group (itself and the C++ compilers inductor started), so nothing is left behind.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path


def _end_with_parent(folder: Path) -> None:
    """Read stdin until the parent closes it (or dies), then remove the build's `folder` (a parent
    that was killed could not) and end this process group at once."""

    def watch() -> None:
        try:
            while sys.stdin.buffer.read(4096):
                pass
        except (OSError, ValueError):
            pass
        shutil.rmtree(folder, ignore_errors=True)
        if hasattr(os, "killpg") and os.getpgid(0) == os.getpid():  # our own group (the server made it)
            os.killpg(0, signal.SIGKILL)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def build(spec: dict) -> dict:
    """Compile and save the step `spec` describes; what happened, as the result file says it."""
    import torch

    from bringup.kernels.cpu import onednn_packed

    from . import cpu_compiled_decode, saved_decode_step
    from .cpu_linears import prepare_linears_for_cpu
    from .gguf_weights import prepare_for_cpu
    from .model_runner import ModelRunner
    from .model_source import load_model

    started = time.monotonic()
    if not (saved_decode_step.available() and cpu_compiled_decode.ONE_GRAPH):
        return {"ok": False, "error": f"torch {torch.__version__} cannot save a compiled decode step for any "
                                      "batch size (that needs torch 2.13's AOT compile)"}
    torch.set_num_threads(int(spec["threads"]))  # the server's: its key and inductor's code depend on it
    import torch._inductor.config

    torch._inductor.config.compile_threads = 1  # one core for the build, beside the server's (no worker pool)
    cpu = torch.device("cpu")
    model = load_model(spec["model"], device=cpu, dtype=spec["dtype"], load_format=spec["load_format"]).model
    onednn_packed.ENABLED = bool(spec["onednn_packed"])
    prepare_linears_for_cpu(model)  # as the server's engine prepared its model (engine.py)
    prepare_for_cpu(model)
    pools = spec["pools"]
    runner = ModelRunner(model, device=cpu, num_pages=pools["num_pages"], page_size=pools["page_size"],
                         num_slots=pools["num_slots"], kv_dtype=pools["kv_dtype"], conv_dtype=pools["conv_dtype"],
                         ssm_dtype=pools["ssm_dtype"], swa_pages=pools["swa_pages"], log=lambda message: None)
    key = saved_decode_step.step_key(model, runner.kv_pool, runner.state_pool)
    if key != spec["key"]:
        return {"ok": False, "error": f"the build's model and pools differ from the server's (key {key} for "
                                      f"{spec['key']}): a step built here could not be loaded there"}
    seconds = runner.compile_decode(int(spec["max_batch"]))
    compiled = runner.compiled_decode
    if not Path(spec["path"]).is_file():
        return {"ok": False, "error": f"the step was compiled but not saved ({compiled.how})"}
    return {"ok": True, "how": compiled.how, "phases": compiled.phases, "compile_seconds": round(seconds, 3),
            "seconds": round(time.monotonic() - started, 3)}


def main(argv: list[str]) -> int:
    _end_with_parent(Path(argv[1]).parent)
    spec = json.loads(Path(argv[1]).read_text())
    try:
        result = build(spec)
    except Exception as err:  # noqa: BLE001 - reported to the server, which keeps decoding eagerly
        from .cpu_compiled_decode import error_summary

        result = {"ok": False, "error": error_summary(err)}
    Path(spec["result"]).write_text(json.dumps(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
