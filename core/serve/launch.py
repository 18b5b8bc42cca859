"""`bringup serve`: load the model, size the pools, start the HTTP server, say when it is ready.

The log speaks SGLang's start-up lines (sglang-notes §5.4) so that `core/client/startup_log.py` follows
our engine and a real SGLang server with one parser:
  Load weight begin / Load weight end / KV Cache is allocated / Mamba Cache is allocated
  max_total_num_tokens=..., chunked_prefill_size=..., max_running_requests=..., context_len=...
(the Engine logs the weight and pool lines), then from here:
  Uvicorn running on http://127.0.0.1:PORT
  The server is fired up and ready to roll!
The port is bound before the model loads, so a busy port fails in a second with a clear message.
"""

from __future__ import annotations

import asyncio
import errno
import os
import logging
import socket
import sys
import time

from bringup.core.errors import UserError

from bringup.core.engine.config import EngineConfig
from bringup.core.engine.model_source import model_source

log = logging.getLogger("bringup.server")
DEFAULT_PORT = 30000


class _Formatter(logging.Formatter):
    """SGLang's `[%Y-%m-%d %H:%M:%S] message`, with the level named when it is not INFO."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        if record.levelno != logging.INFO:
            stamp, _, rest = text.partition("] ")
            text = f"{stamp}] {record.levelname} {rest}"
        return text


def setup_logging() -> None:
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(_Formatter("[%(asctime)s] %(message)s", datefmt="%Y-%m-%d %H:%M:%S"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    for noisy in ("httpx", "httpcore", "urllib3", "filelock"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def bind_socket(host: str, port: int) -> socket.socket:
    """Bind now (before loading weights), with the options uvicorn would use."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as err:
        sock.close()
        if err.errno == errno.EADDRINUSE:
            raise UserError(f"port {port} on {host} is already in use (another server is running there?); "
                            "stop it, or choose another port with --port N (--port 0 picks a free one)") from None
        if err.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT) or isinstance(err, socket.gaierror):
            raise UserError(f"cannot listen on {host}: {err.strerror or err}; use an address of this machine, "
                            "e.g. --host 127.0.0.1") from None
        if err.errno == errno.EACCES:
            raise UserError(f"no permission to listen on port {port}; use a port above 1023") from None
        raise
    sock.set_inheritable(True)
    return sock


def summary_line(info: dict, device_type: str, free_bytes: int | None) -> str:
    """SGLang's TP0 summary line, from the engine's server_info()."""
    alloc = info.get("allocated") or {}
    chunk = info.get("chunked_prefill_size") or -1
    mem_key = "available_cpu_mem" if device_type == "cpu" else "available_gpu_mem"
    line = (f"max_total_num_tokens={alloc.get('kv_tokens', 0)}, chunked_prefill_size={chunk}, "
            f"max_prefill_tokens={chunk}, max_running_requests={info.get('max_running_requests')}, "
            f"context_len={info.get('context_len') or 0}")
    if free_bytes is not None:
        line += f", {mem_key}={free_bytes / 1024**3:.2f} GB"
    return line


def serve(config: EngineConfig, *, host: str = "127.0.0.1", port: int = DEFAULT_PORT, api_key: str | None = None,
          served_model_name: str | None = None, limits: dict | None = None, allowed_hosts: tuple[str, ...] = (),
          model_aliases: tuple[str, ...] = ()) -> int:
    """Serve the engine `config` describes (its `model` as the user named it: a catalogue name,
    `default`, a folder...). `limits`: overrides for limits.default_limits (max_body_bytes,
    max_prompts, max_queued_requests, max_queued_tokens, drain_grace_s); None values keep the defaults."""
    started = time.monotonic() - (_process_age() or 0.0)  # count the interpreter's start and imports too
    setup_logging()
    source = config.model
    model, name = model_source(source, config.load_format)
    sock = bind_socket(host, port)
    port = sock.getsockname()[1]
    if host not in ("127.0.0.1", "localhost", "::1") and not api_key:
        log.warning("listening on %s without an API key: anyone who can reach this machine can use the engine", host)

    from bringup.core.engine.engine import Engine
    from bringup.core.engine.one_openmp_pool import run_on_ending_thread

    # On the CPU one core is left to the HTTP event loop whenever the engine still keeps 2 threads: its
    # turns stall a thread team that has every core (cpu_threads.MIN_THREADS_BESIDE_RESERVE has the figures).
    # Built on a thread that ends: the loop thread that steps it then holds the only OpenMP pool.
    # --cpu-compile auto: the CPU's compiled decode step is built beside the serving engine, which
    # decodes eagerly meanwhile (background_decode_step.py); on: compiled before the server is ready.
    engine = run_on_ending_thread(lambda: Engine(config.replace(model=model, cpu_cores_reserved=1,
                                                                cpu_compile_background=config.cpu_compile is None),
                                                 log=log.info))  # logs the weight and pool lines
    try:
        info = engine.server_info()
        from bringup.core.engine import device as devices

        log.info(summary_line(info, engine.device.type, devices.free_memory(engine.device)))
        aliases = tuple(dict.fromkeys(a for a in ("default", name, source, model, *model_aliases) if a))
        options = ServeOptions(host, port, served_model_name or name, api_key, aliases, allowed_hosts, limits or {})
        options.started = started
        return asyncio.run(_serve_async(engine, sock, info, options))
    finally:
        engine.close()  # no build process outlives the server


def warmup_failure(err: BaseException, prompt_tokens: int, context: int | None) -> str:
    """What to tell a user whose server failed its warm-up request: the field when the error names
    one (the model's context), else the error itself and that the config's sizes were checked."""
    what = f"{type(err).__name__}: {err}"
    head = f"the warm-up request ({prompt_tokens} prompt token(s), 2 new) failed: {what}"
    if "context" in str(err) and context is not None:
        return (f"{head}. The model's context is {context} tokens (max_position_embeddings in config.json): "
                "raise it, or check that config.json belongs to this checkpoint")
    return (f"{head}. The config's sizes passed the engine's checks (core/layermap/constraints.py), so this is "
            "a bug of the engine or a kernel on this device: report it with this log")


def _process_age() -> float | None:
    """Seconds since this process started (Linux: /proc), or None where the OS does not say."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):
        return None


class ServeOptions:
    def __init__(self, host, port, model_name, api_key, aliases, allowed_hosts, limits):
        self.host, self.port, self.model_name, self.api_key = host, port, model_name, api_key
        self.aliases, self.allowed_hosts, self.limits = aliases, allowed_hosts, limits
        self.started = time.monotonic()  # when `bringup serve` started (the ready line counts from it)


async def _serve_async(engine, sock, info, opts: ServeOptions) -> int:
    import uvicorn

    from .access import allowed_host_names
    from .limits import default_limits
    from .async_engine import AsyncEngine
    from .drain import DrainingServer
    from .metrics import EngineMetrics
    from bringup.core.engine.sampling import SamplingParams
    from .server import ServerState, create_app

    static = {k: info[k] for k in ("max_running_requests", "page_size", "context_len") if isinstance(info.get(k), int)}
    metrics = EngineMetrics(opts.model_name, static=static)
    aengine = AsyncEngine(engine, metrics)
    tokenizer = engine.tokenizer
    vocab = int(info.get("vocab_size") or getattr(engine, "vocab_size", 0) or len(tokenizer))
    limits = default_limits(info, **{k: v for k, v in opts.limits.items() if v is not None})
    log.info("Limits: %s", limits.describe())
    state = ServerState(aengine, model_name=opts.model_name, tokenizer=tokenizer, vocab_size=vocab,
                        api_key=opts.api_key,
                        info={"server_args": {"host": opts.host, "port": opts.port, "api_key_set": bool(opts.api_key),
                                              "allowed_hosts": list(opts.allowed_hosts)}},
                        context_len=info.get("context_len"), limits=limits, model_aliases=opts.aliases,
                        host_names=allowed_host_names(opts.host, opts.allowed_hosts))
    state.static_info = info
    app = create_app(state)
    # uvicorn's own grace only covers writing the last bytes: the drain (drain.py) has already
    # ended every request by then.
    config = uvicorn.Config(app, host=opts.host, port=opts.port, log_config=None, access_log=False,
                            lifespan="off", timeout_graceful_shutdown=5)
    server = DrainingServer(config, state)
    aengine.start()
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                return 1
            await asyncio.sleep(0.05)
        # uvicorn stays silent about sockets it was handed; say it in its own words.
        shown = f"[{opts.host}]" if ":" in opts.host else opts.host
        log.info("Uvicorn running on http://%s:%d (Press CTRL+C to quit)", shown, opts.port)
        # A real request through the whole path before saying "ready" (SGLang does the same), short
        # enough for any context the engine took (the config's sizes were checked when it was built).
        context = info.get("context_len")
        warm_ids = (list(tokenizer("Hello", add_special_tokens=False).input_ids) or [0])[: max(1, (context or 2) - 1)]
        first = time.monotonic()
        try:
            stream = await aengine.submit(warm_ids, SamplingParams(max_new_tokens=2, temperature=0.0, ignore_eos=True))
            while not (await stream.get()).finished:
                pass
        except Exception as err:  # noqa: BLE001 - said as the cause, not as a traceback
            log.error(warmup_failure(err, len(warm_ids), context))
            return 1
        stages = ", ".join(f"{k} {v:.2f} s" for k, v in (info.get("startup_seconds") or {}).items())
        words = engine.decode_step_words() if hasattr(engine, "decode_step_words") else None
        log.info("Ready in %.1f s since the process started (engine: %s; first request %.2f s)%s",
                 time.monotonic() - opts.started, stages or "-", time.monotonic() - first,
                 f"; {words}" if words else "")
        state.ready = True
        log.info("The server is fired up and ready to roll!")
        await task
    finally:
        aengine.stop()
        state.shutdown()
    log.info("The server has stopped")
    return 130 if server.interrupted else 0  # README's exit codes: 130 for Ctrl-C, 0 for SIGTERM's drain
