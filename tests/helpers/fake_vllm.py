"""A stand-in for the external `vllm` command, for tests of the code that launches and watches it.

`install(folder)` writes an executable `vllm` there; put the folder first on PATH. `vllm serve MODEL ...
--host H --port P` then logs a start-up in vLLM 0.33.0's words and format (each line prefixed with the
process, as vllm/logger.py:28-33 writes them) and serves what the workbench reads from vLLM: /health,
/metrics with `vllm:` lines (names from vllm/v1/metrics/loggers.py, see core/client/metrics_scrape.py),
/v1/models and a minimal /v1/chat/completions (streamed, with usage). Each answer moves the counters,
so the graphs show what the requests did. Only the standard library: it runs as the external binary.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

KV_TOKENS = 99_584  # what its start-up log says the pool holds
WEIGHTS_GIB = 2.5


def install(folder: Path) -> Path:
    """An executable `vllm` in `folder`, run by this interpreter."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "vllm"
    script.write_text(f"#!{sys.executable}\n" + Path(__file__).read_text(encoding="utf-8"), encoding="utf-8")
    script.chmod(0o755)
    return script


class _State:
    def __init__(self, model: str) -> None:
        self.model = model
        self.lock = threading.Lock()
        self.running = 0
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.success = 0
        self.ttft_sum = 0.0

    def metrics(self) -> str:
        labels = f'engine="0",model_name="{self.model}"'
        with self.lock:
            usage = min(1.0, self.running * 0.004 + (0.01 if self.success else 0.0))
            return "\n".join([
                "# HELP vllm:num_requests_running Number of requests in model execution batches.",
                "# TYPE vllm:num_requests_running gauge",
                f"vllm:num_requests_running{{{labels}}} {float(self.running)}",
                "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
                "# TYPE vllm:num_requests_waiting gauge",
                f"vllm:num_requests_waiting{{{labels}}} 0.0",
                "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.",
                "# TYPE vllm:kv_cache_usage_perc gauge",
                f"vllm:kv_cache_usage_perc{{{labels}}} {usage}",
                "# TYPE vllm:prompt_tokens_total counter",
                f"vllm:prompt_tokens_total{{{labels}}} {float(self.prompt_tokens)}",
                "# TYPE vllm:generation_tokens_total counter",
                f"vllm:generation_tokens_total{{{labels}}} {float(self.generation_tokens)}",
                "# TYPE vllm:request_success_total counter",
                f'vllm:request_success_total{{engine="0",finished_reason="length",model_name="{self.model}"}} '
                f"{float(self.success)}",
                "# TYPE vllm:time_to_first_token_seconds histogram",
                f'vllm:time_to_first_token_seconds_bucket{{{labels},le="+Inf"}} {float(self.success)}',
                f"vllm:time_to_first_token_seconds_count{{{labels}}} {float(self.success)}",
                f"vllm:time_to_first_token_seconds_sum{{{labels}}} {self.ttft_sum}",
                f'vllm:cache_config_info{{block_size="16",engine="0",gpu_memory_utilization="0.92",'
                f'num_gpu_blocks="{KV_TOKENS // 16}"}} 1.0',
                "",
            ])


def _handler(state: _State):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # vLLM's access log is not what the tests read
            pass

        def _send(self, code: int, body: bytes, kind: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # noqa: N802
            if self.path == "/health":
                self._send(200, b"", "text/plain")
            elif self.path == "/metrics":
                self._send(200, state.metrics().encode(), "text/plain; version=0.0.4")
            elif self.path == "/v1/models":
                doc = {"object": "list", "data": [{"id": state.model, "object": "model", "owned_by": "vllm"}]}
                self._send(200, json.dumps(doc).encode(), "application/json")
            else:
                self._send(404, b'{"detail":"Not Found"}', "application/json")

        def do_POST(self) -> None:  # noqa: N802
            if self.path != "/v1/chat/completions":
                self._send(404, b'{"detail":"Not Found"}', "application/json")
                return
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            tokens = int(body.get("max_tokens") or 16)
            prompt = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
            start = time.monotonic()
            with state.lock:
                state.running += 1
                state.prompt_tokens += prompt
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            try:
                for i in range(tokens):
                    time.sleep(0.02)  # a decode step: the scrape sees the request running
                    chunk = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": state.model,
                             "choices": [{"index": 0, "delta": {"content": f" tok{i}"}, "finish_reason": None}]}
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    with state.lock:
                        state.generation_tokens += 1
                        if i == 0:
                            state.ttft_sum += time.monotonic() - start
                usage = {"prompt_tokens": prompt, "completion_tokens": tokens, "total_tokens": prompt + tokens}
                last = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": state.model, "choices": [],
                        "usage": usage}
                self.wfile.write(f"data: {json.dumps(last)}\n\ndata: [DONE]\n\n".encode())
            finally:
                with state.lock:
                    state.running -= 1
                    state.success += 1
                self.close_connection = True

    return Handler


def _log(process: str, where: str, message: str, level: str = "INFO") -> None:
    stamp = time.strftime("%m-%d %H:%M:%S")
    print(f"({process} pid={os.getpid()}) {level} {stamp} [{where}] {message}", flush=True)


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "serve" or len(argv) < 2:
        print("usage: vllm serve MODEL [options]", file=sys.stderr)
        return 2
    model, options = argv[1], argv[2:]
    host = options[options.index("--host") + 1] if "--host" in options else "0.0.0.0"
    port = int(options[options.index("--port") + 1]) if "--port" in options else 8000
    api, core = "APIServer", "EngineCore_DP0"
    _log(api, "startup.py:96", f"non-default args: {{'model': '{model}', 'port': {port}}}")
    _log(core, "core.py:140", "Initializing a V1 LLM engine (v0.33.0) with config: model='%s'" % model)
    _log(core, "gpu_model_runner.py:4979", f"Starting to load model {model}...")
    _log(core, "gpu_model_runner.py:5089", f"Model loading took {WEIGHTS_GIB} GiB memory and 1.234567 seconds")
    _log(core, "gpu_worker.py:773", "Available KV cache memory: 61.37 GiB")
    _log(core, "kv_cache_utils.py:1147", f"GPU KV cache size: {KV_TOKENS:,} tokens, Maximum concurrency for "
                                         "262,144 tokens per request: 3.04x")
    _log(core, "gpu_model_runner.py:6517", "Graph capturing finished in 4 secs, took 0.31 GiB")
    server = ThreadingHTTPServer((host, port), _handler(_State(model)))
    _log(api, "entry.py:139", f"Starting vLLM server on http://{host}:{port}")
    print("INFO:     Started server process [%d]" % os.getpid(), flush=True)
    print("INFO:     Waiting for application startup.", flush=True)
    print("INFO:     Application startup complete.", flush=True)
    try:
        server.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
