"""A first start of `bringup serve` on the CPU as a user lives it: time to ready, then tokens per
second while the compiled decode step builds and after it is in use, per --cpu-compile mode.

    python bench/serve_first_start.py [SOURCE] [--modes auto,on,off] [--seconds 150] [--concurrency 4]
                                      [--output-len 64] [--input-len 32] [--keep-cache] [--json]

Each mode starts a server on a fresh inductor cache (TORCHINDUCTOR_CACHE_DIR in a new temporary
folder: nothing compiled or saved before, as on a first start; --keep-cache reuses the first mode's
folder for the others, a second start), with a client that keeps --concurrency greedy streamed
completions in flight from the moment the server is ready until --seconds after it was launched.
Per mode it prints: seconds to ready (from the launch), when the compiled step came into use
(the server's log line), tokens in the first 60 s after the launch and their rate, the rate after
the switch, and the longest gap between two tokens of one stream while the step loaded beside the
eager steps against the median gap. `on` (the step compiled before ready, as every start did
before) and `off` (eager steps only) are the baselines measured in the same run. Standard library
only on the client side.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

_PORT = re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)")
_IN_USE = re.compile(r"compiled decode step in use after ([\d.]+) s.*loaded in ([\d.]+) s")


class Server:
    def __init__(self, source: str, mode: str, cache: str):
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "TORCHINDUCTOR_CACHE_DIR": cache}
        self.launched = time.monotonic()
        self.proc = subprocess.Popen([sys.executable, "-m", "bringup", "serve", source, "--port", "0",
                                      "--cpu-compile", mode], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, bufsize=1, env=env)
        self.lines: list[tuple[float, str]] = []
        self.port = None
        self.ready_at = self.in_use_at = self.load_s = None
        self.ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            now = time.monotonic() - self.launched
            self.lines.append((now, line.rstrip()))
            m = _PORT.search(line)
            self.port = self.port or (m and int(m.group(1)))
            if "fired up and ready" in line:
                self.ready_at = now
                self.ready.set()
            m = _IN_USE.search(line)
            if m:
                self.in_use_at, self.load_s = now, float(m.group(2))
        self.ready.set()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def stream_tokens(port: int, prompt: list[int], max_tokens: int, stamps: list[float], t0: float) -> None:
    """One streamed greedy completion; each content chunk's arrival (seconds since t0) into `stamps`."""
    body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
                       "stream": True}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as resp:
        for raw in resp:
            line = raw.decode().strip()
            if line.startswith("data: ") and line != "data: [DONE]":
                chunk = json.loads(line[6:])
                if chunk.get("choices") and chunk["choices"][0].get("text"):
                    stamps.append(time.monotonic() - t0)


def run_mode(source: str, mode: str, cache: str, args) -> dict:
    server = Server(source, mode, cache)
    try:
        server.ready.wait(args.ready_timeout)
        if server.ready_at is None or server.port is None:
            raise SystemExit(f"{mode}: the server did not get ready:\n" + "\n".join(x for _, x in server.lines[-20:]))
        streams: list[list[float]] = []
        end = args.seconds

        def worker(i: int) -> None:
            n = 0
            while time.monotonic() - server.launched < end:
                stamps: list[float] = []
                streams.append(stamps)
                prompt = [3 + (97 * i + 13 * n + 7 * j) % 900 for j in range(args.input_len)]
                stream_tokens(server.port, prompt, args.output_len, stamps, server.launched)
                n += 1

        workers = [threading.Thread(target=worker, args=(i,)) for i in range(args.concurrency)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    finally:
        server.stop()
    stamps = sorted(t for s in streams for t in s)
    first_minute = sum(1 for t in stamps if t < 60)
    out = {"mode": mode, "ready_s": round(server.ready_at, 1), "tokens": len(stamps),
           "tokens_first_60s": first_minute, "tok_s_first_60s": round(first_minute / 60, 1),
           "in_use_s": round(server.in_use_at, 1) if server.in_use_at else None, "load_s": server.load_s}
    last = stamps[-1] if stamps else 0
    if server.in_use_at:  # after the switch (a few seconds in, past the first compiled steps) to the end
        since = server.in_use_at + 2
        n = sum(1 for t in stamps if t >= since)
        out["tok_s_after_switch"] = round(n / max(1e-9, last - since), 1) if last > since else None
        before = [t for t in stamps if server.ready_at + 2 <= t < server.in_use_at - (server.load_s or 0)]
        out["tok_s_before_switch"] = (round(len(before) / (before[-1] - before[0]), 1)
                                      if len(before) > 1 and before[-1] > before[0] else None)
        # The gaps within each stream while the step loaded (and just after: its first compiled steps).
        window = (server.in_use_at - (server.load_s or 0) - 0.5, server.in_use_at + 2)
        gaps_in = [b - a for s in streams for a, b in zip(s, s[1:]) if window[0] <= b <= window[1]]
        gaps_out = [b - a for s in streams for a, b in zip(s, s[1:]) if b < window[0]]
        out["max_gap_while_loading_s"] = round(max(gaps_in), 3) if gaps_in else None
        out["median_gap_before_s"] = round(statistics.median(gaps_out), 3) if gaps_out else None
    else:  # compiled from the start (on) or never (off): the rate from ready to the end
        since = server.ready_at + 2
        n = sum(1 for t in stamps if t >= since)
        out["tok_s_after_ready"] = round(n / max(1e-9, last - since), 1) if last > since else None
    out["log"] = [x for _, x in server.lines if "CPU:" in x or "Ready in" in x]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", nargs="?", default="default")
    ap.add_argument("--modes", default="auto,on,off")
    ap.add_argument("--seconds", type=float, default=150, help="client load until this long after each launch")
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--input-len", type=int, default=32)
    ap.add_argument("--ready-timeout", type=float, default=600)
    ap.add_argument("--keep-cache", action="store_true", help="one cache for every mode (a second start after the first)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    base = tempfile.mkdtemp(prefix="bringup-first-start-")
    results = []
    for i, mode in enumerate(args.modes.split(",")):
        cache = os.path.join(base, "inductor" if args.keep_cache else f"inductor-{i}-{mode}")
        result = run_mode(args.source, mode.strip(), cache, args)
        results.append(result)
        for line in result["log"]:
            print(f"  [{mode}] {line}", flush=True)
        print(json.dumps({k: v for k, v in result.items() if k != "log"}), flush=True)
    print(f"\n{'mode':6} {'ready s':>8} {'in use s':>9} {'tok/s 0-60 s':>13} {'before':>7} {'after':>7} "
          f"{'load s':>7} {'max gap':>8} {'median gap':>10}")
    for r in results:
        after = r.get("tok_s_after_switch") or r.get("tok_s_after_ready")
        print(f"{r['mode']:6} {r['ready_s']:8.1f} {r['in_use_s'] or '-':>9} {r['tok_s_first_60s']:13.1f} "
              f"{r.get('tok_s_before_switch') or '-':>7} {after or '-':>7} {r['load_s'] or '-':>7} "
              f"{r.get('max_gap_while_loading_s') or '-':>8} {r.get('median_gap_before_s') or '-':>10}")
    if args.json:
        print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
