"""Soak `bringup serve` with the openai SDK: many clients for a few minutes, some of them hostile.

    python bench/soak.py [SOURCE] [--duration 180] [--max-requests 3000] [--concurrency 16]
                         [--max-tokens 32] [--hostile 0.1] [--device cpu]

Starts its own server on 127.0.0.1 (loopback only, a free port, the key in the environment), then:
  0. one request of `--batch` prompts against as many one-prompt requests sent at once (a batch is
     queued in one engine command, so it should take no longer);
  1. baseline: 10 streaming requests one at a time (the unloaded TTFT and ITL of this run);
  2. soak: `--concurrency` clients send streaming completions and chats until `--duration` seconds
     or `--max-requests` requests; a `--hostile` share of them hang up mid-stream, send a body of
     nearly the size limit, or send broken JSON (each must get its 4xx, or free its slots);
  3. SIGTERM, and how long the drain took.
Prints requests served, errors (anything but the expected answer), p50/p99 time to first token
and inter-token latency (between streamed chunks) next to the baseline, rejected requests (429),
/health latency during the soak against the idle server's, and the server's RSS at start, after
the soak, and its peak.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import signal
import subprocess
import sys
import time

import httpx
import psutil

KEY = "sk-soak"
_PORT = re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)")


def start_server(source: str | None, device: str, extra: list[str]) -> tuple[subprocess.Popen, str, list[str]]:
    argv = [sys.executable, "-m", "bringup", "serve", *([source] if source else []), "--host", "127.0.0.1",
            "--port", "0", "--device", device, *extra]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                            env={**os.environ, "BRINGUP_API_KEY": KEY, "PYTHONUNBUFFERED": "1"})
    lines: list[str] = []
    port = None
    for line in proc.stdout:
        lines.append(line.rstrip())
        m = _PORT.search(line)
        port = port or (m and int(m.group(1)))
        if "fired up and ready" in line:
            break
    if port is None or proc.poll() is not None:
        raise SystemExit("the server did not start:\n" + "\n".join(lines[-30:]))
    import threading

    threading.Thread(target=lambda: [lines.append(x.rstrip()) for x in proc.stdout], daemon=True).start()
    return proc, f"http://127.0.0.1:{port}", lines


class Tally:
    def __init__(self):
        self.served = self.errors = self.rejected = self.hostile = 0
        self.ttft: list[float] = []
        self.itl: list[float] = []
        self.error_kinds: dict[str, int] = {}

    def error(self, kind: str) -> None:
        self.errors += 1
        self.error_kinds[kind] = self.error_kinds.get(kind, 0) + 1


async def one_stream(client, tally: Tally, max_tokens: int, chat: bool, hang_up: bool = False) -> None:
    import openai

    start = time.perf_counter()
    last = None
    chunks = 0
    kwargs = dict(model="default", max_tokens=max_tokens, temperature=0.8, stream=True,
                  extra_body={"ignore_eos": True})
    try:
        if chat:
            stream = await client.chat.completions.create(
                messages=[{"role": "user", "content": f"soak {random.random()}"}], **kwargs)
        else:
            stream = await client.completions.create(prompt=f"soak request {random.random()}", **kwargs)
        async for chunk in stream:
            if not chunk.choices:
                continue
            piece = chunk.choices[0].delta.content if chat else chunk.choices[0].text
            if not piece:
                continue
            now = time.perf_counter()
            if last is None:
                tally.ttft.append(now - start)
            else:
                tally.itl.append(now - last)
            last = now
            chunks += 1
            if hang_up and chunks == 3:
                await stream.close()
                tally.hostile += 1
                return
        tally.served += 1
    except openai.RateLimitError:
        tally.rejected += 1
    except Exception as err:  # noqa: BLE001 - counted, the soak goes on
        tally.error(type(err).__name__)


async def hostile_body(http: httpx.AsyncClient, tally: Tally, limit: int) -> None:
    """Nearly the largest body the server takes, or broken JSON: each must get its 4xx quickly."""
    if random.random() < 0.5:
        body = b'{"prompt": "' + b"spam " * ((limit - 64) // 5) + b'", "max_tokens": 1}'
    else:
        body = b'{"prompt": ' + b"[" * 5000 + b"}"
    try:
        r = await http.post("/v1/completions", content=body, headers={"Content-Type": "application/json"})
        tally.hostile += 1
        if r.status_code not in (400, 413, 429):
            tally.error(f"hostile body got {r.status_code}")
    except Exception as err:  # noqa: BLE001
        tally.error(type(err).__name__)


async def soak(base: str, args, tally: Tally, limit: int) -> float:
    import openai

    client = openai.AsyncOpenAI(base_url=base + "/v1", api_key=KEY, max_retries=0, timeout=600)
    http = httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {KEY}"}, timeout=600)
    deadline = time.monotonic() + args.duration
    issued = 0

    async def worker():
        nonlocal issued
        while time.monotonic() < deadline and issued < args.max_requests:
            issued += 1
            roll = random.random()
            if roll < args.hostile / 2:
                await one_stream(client, tally, args.max_tokens, chat=False, hang_up=True)
            elif roll < args.hostile:
                await hostile_body(http, tally, limit)
            else:
                await one_stream(client, tally, args.max_tokens, chat=roll > 0.9)

    t0 = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(args.concurrency)))
    await client.close()
    await http.aclose()
    return time.monotonic() - t0


async def batch_against_singles(base: str, n: int, max_tokens: int) -> tuple[float, float]:
    """Seconds for one request of n prompts, and for n one-prompt requests sent together."""
    import openai

    client = openai.AsyncOpenAI(base_url=base + "/v1", api_key=KEY, max_retries=0, timeout=600)
    prompts = [[5 + i % 100, 6, 7] for i in range(n)]
    kwargs = dict(model="default", max_tokens=max_tokens, temperature=0, extra_body={"ignore_eos": True})
    t0 = time.perf_counter()
    await client.completions.create(prompt=prompts, **kwargs)
    t1 = time.perf_counter()
    await asyncio.gather(*(client.completions.create(prompt=p, **kwargs) for p in prompts))
    t2 = time.perf_counter()
    await client.close()
    return t1 - t0, t2 - t1


async def health_probe(base: str, samples: list[float], stop: asyncio.Event) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=60) as http:
        while not stop.is_set():
            t0 = time.perf_counter()
            await http.get("/health")
            samples.append(time.perf_counter() - t0)
            await asyncio.sleep(0.25)


def pct(values: list[float], q: float) -> str:
    if not values:
        return "-"
    values = sorted(values)
    return f"{1e3 * values[min(len(values) - 1, int(q * len(values)))]:.1f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("source", nargs="?", default=None, help="model (default: the bundled default model)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--duration", type=float, default=180.0, help="seconds of soak (default 180)")
    ap.add_argument("--max-requests", type=int, default=3000, help="stop after this many requests (default 3000)")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--hostile", type=float, default=0.1, help="share of hostile requests (default 0.1)")
    ap.add_argument("--batch", type=int, default=64, help="prompts in the batch-against-singles check (0: skip)")
    ap.add_argument("--seed", type=int, default=0)
    args, extra = ap.parse_known_args()
    random.seed(args.seed)

    proc, base, lines = start_server(args.source, args.device, extra)
    server = psutil.Process(proc.pid)
    peak = rss_start = server.memory_info().rss
    try:
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {KEY}"}, timeout=60) as c:
            server_limits = c.get("/server_info").json()["limits"]
            limit = server_limits["max_body_bytes"]
        import openai

        batch = min(args.batch, server_limits["max_prompts"])
        batch_s = asyncio.run(batch_against_singles(base, batch, 16)) if batch else None
        idle_health: list[float] = []

        async def idle_probe():
            stop = asyncio.Event()
            task = asyncio.ensure_future(health_probe(base, idle_health, stop))
            await asyncio.sleep(3)
            stop.set()
            await task

        asyncio.run(idle_probe())

        base_tally = Tally()

        async def baseline():
            client = openai.AsyncOpenAI(base_url=base + "/v1", api_key=KEY, max_retries=0)
            for _ in range(10):
                await one_stream(client, base_tally, args.max_tokens, chat=False)
            await client.close()

        asyncio.run(baseline())
        tally = Tally()

        loaded_health: list[float] = []

        async def run_and_watch():
            nonlocal peak
            stop = asyncio.Event()
            probe = asyncio.ensure_future(health_probe(base, loaded_health, stop))
            task = asyncio.ensure_future(soak(base, args, tally, limit))
            while not task.done():
                peak = max(peak, server.memory_info().rss)
                await asyncio.sleep(0.5)
            stop.set()
            await probe
            return task.result()

        elapsed = asyncio.run(run_and_watch())
        rss_end = server.memory_info().rss
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {KEY}"}, timeout=60) as c:
            info = c.get("/server_info").json()
    finally:
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=120)
        drain_s = time.monotonic() - t0
    mib = 1 / 2**20
    print(f"model {info.get('model_name')} on {info.get('device')}, {args.concurrency} clients, "
          f"{elapsed:.0f} s, max_tokens {args.max_tokens}, hostile share {args.hostile:g}")
    print("limits: " + ", ".join(f"{k} {v}" for k, v in server_limits.items()))
    print(f"requests served {tally.served}, errors {tally.errors} {tally.error_kinds or ''}, "
          f"rejected (429) {tally.rejected}, hostile handled {tally.hostile}")
    print(f"{'':18}{'p50 ms':>10}{'p99 ms':>10}   baseline p50 / p99 (one client)")
    for name, soaked, alone in (("TTFT", tally.ttft, base_tally.ttft), ("ITL (per chunk)", tally.itl, base_tally.itl)):
        print(f"{name:18}{pct(soaked, 0.5):>10}{pct(soaked, 0.99):>10}   {pct(alone, 0.5)} / {pct(alone, 0.99)}")
    print(f"{'/health':18}{pct(loaded_health, 0.5):>10}{pct(loaded_health, 0.99):>10}   "
          f"{pct(idle_health, 0.5)} / {pct(idle_health, 0.99)} (idle server); max under load "
          f"{pct(loaded_health, 1.0)} ms")
    if batch_s:
        print(f"one request of {batch} prompts: {batch_s[0]:.2f} s; {batch} one-prompt requests at once: "
              f"{batch_s[1]:.2f} s (16 tokens each)")
    print(f"throughput {tally.served / elapsed:.2f} requests/s; tokens generated "
          f"{info['stats']['generated_tokens_total']}")
    print(f"server RSS: start {rss_start * mib:.0f} MiB, end {rss_end * mib:.0f} MiB, peak {peak * mib:.0f} MiB")
    print(f"pools after the soak: kv used {info['stats']['kv_tokens_used']}, slots used "
          f"{info['stats']['state_slots_used']}, check {info['pools_check']}")
    print(f"SIGTERM: exit code {code} after {drain_s:.1f} s; tracebacks in the log: "
          f"{sum('Traceback' in x for x in lines)}")
    return 0 if tally.errors == 0 and code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
