"""Start `bringup serve`, use it as a client would, stop it: the serving path end to end on a device.

    python bench/serve_check.py SOURCE [--device cuda] [--load-format dummy] [--requests 4]
                                [--max-tokens 32] [--out result.json] [-- extra serve flags]

Starts the server on 127.0.0.1 (a free port), waits for "fired up and ready", sends `--requests`
completions at once (/v1/completions) and one /generate, reads /server_info (load format, weights
source, the pools) and /metrics (token counters, pool usage), then SIGTERM and waits for the drain.
Prints each answer's tokens and time, the server facts and the metrics lines, and exits non-zero when
any step fails. Standard library only (the client side needs nothing installed).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

_PORT = re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)")


def start(argv: list[str], timeout: float) -> tuple[subprocess.Popen, str, list[str]]:
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    lines: list[str] = []
    port, ready = None, threading.Event()

    def read():
        nonlocal port
        for line in proc.stdout:
            lines.append(line.rstrip())
            print(f"  [serve] {line.rstrip()}", flush=True)
            m = _PORT.search(line)
            port = port or (m and int(m.group(1)))
            if "fired up and ready" in line:
                ready.set()
        ready.set()

    threading.Thread(target=read, daemon=True).start()
    ready.wait(timeout)
    if port is None or proc.poll() is not None or not any("fired up and ready" in x for x in lines):
        stop(proc)
        raise SystemExit(f"the server did not get ready in {timeout:.0f} s (exit code {proc.poll()})")
    return proc, f"http://127.0.0.1:{port}", lines


def stop(proc: subprocess.Popen, timeout: float = 60) -> float:
    started = time.monotonic()
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return time.monotonic() - started


def call(base: str, path: str, body: dict | None = None, timeout: float = 300):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, headers={"Content-Type": "application/json"} if data else {})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        raw = resp.read().decode()
    return json.loads(raw) if path != "/metrics" else raw


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--load-format", default="dummy")
    ap.add_argument("--requests", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--ready-timeout", type=float, default=300)
    ap.add_argument("--out", default=None)
    ap.add_argument("extra", nargs="*", help="more `bringup serve` flags (after --)")
    args = ap.parse_args()
    argv = [sys.executable, "-m", "bringup", "serve", args.source, "--host", "127.0.0.1", "--port", "0",
            "--device", args.device, "--load-format", args.load_format, *args.extra]
    print("$ " + " ".join(argv), flush=True)
    t0 = time.monotonic()
    proc, base, _lines = start(argv, args.ready_timeout)
    result: dict = {"ready_s": time.monotonic() - t0, "argv": argv}
    ok = True
    try:
        prompts = ["The H200 has", "Bring-up means", "Mamba layers keep", "A mixture of experts"][: args.requests]
        prompts += [f"Request number {i} says" for i in range(len(prompts), args.requests)]

        def complete(prompt):
            t = time.monotonic()
            out = call(base, "/v1/completions", {"model": "default", "prompt": prompt, "max_tokens": args.max_tokens,
                                                 "temperature": 0, "ignore_eos": True})
            return prompt, out, time.monotonic() - t

        with ThreadPoolExecutor(len(prompts)) as pool:
            answers = list(pool.map(complete, prompts))
        result["completions"] = []
        for prompt, out, seconds in answers:
            usage = out.get("usage", {})
            text = out["choices"][0]["text"]
            print(f"completion {prompt!r}: {usage.get('completion_tokens')} tokens in {seconds:.2f} s "
                  f"(finish {out['choices'][0].get('finish_reason')}): {text[:60]!r}", flush=True)
            result["completions"].append({"prompt": prompt, "usage": usage, "seconds": seconds})
            ok &= usage.get("completion_tokens") == args.max_tokens
        gen = call(base, "/generate", {"text": "Hello", "sampling_params": {"max_new_tokens": 8, "temperature": 0}})
        print(f"/generate: {json.dumps(gen)[:200]}", flush=True)
        info = call(base, "/server_info")
        keys = ("model", "architecture", "load_format", "weights_source", "tokenizer_source", "params", "device_name",
                "dtype", "decode_graphs", "graph_memory_bytes", "max_running_requests", "context_len")
        facts = {k: info.get(k) for k in keys}
        pools = {k: v for k, v in info.items() if k not in keys}
        print("server_info: " + json.dumps(facts), flush=True)
        print("server_info, the rest (plan, pools): " + json.dumps(pools, default=str)[:3000], flush=True)
        result["server_info"] = info
        ok &= info.get("load_format") == args.load_format
        metrics = call(base, "/metrics")
        wanted = [x for x in metrics.splitlines() if x and not x.startswith("#") and "_bucket" not in x
                  and any(w in x for w in ("token", "usage", "running", "queue", "pool", "slots", "requests"))]
        print("metrics:\n  " + "\n  ".join(wanted[:40]), flush=True)
        result["metrics"] = metrics
    except Exception as err:  # noqa: BLE001 - report, then still stop the server
        print(f"FAILED: {type(err).__name__}: {err}", flush=True)
        ok = False
    finally:
        result["drain_s"] = stop(proc)
        print(f"server stopped in {result['drain_s']:.1f} s (exit code {proc.returncode})", flush=True)
    result["ok"] = ok
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2, default=str))
    print("serve check: " + ("OK" if ok else "FAILED"), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
