"""A serving benchmark: drive any OpenAI-compatible server (ours, SGLang, vLLM) as many users would,
and print what they would see: output tok/s, requests/s, TTFT, ITL, TPOT and end-to-end latency.

    python bench/serving.py --base-url http://127.0.0.1:30000 --dataset random --input-len 1024 \\
        --output-len 256 --num-prompts 512 --max-concurrency 256 [--request-rate inf] [--json]
    python bench/serving.py ... --max-concurrency 1,16,64,256   # one run per level, one table

After SGLang's bench_serving (python/sglang/bench_serving.py): each request streams
/v1/completions with `ignore_eos` and a fixed `max_tokens`, greedy, so every request produces the
tokens it asked for; prompts are token ids (no tokenizer needed on the client). Datasets:
- random: input and output lengths drawn uniformly in [len * range_ratio, len] (range_ratio 1:
  fixed lengths), random token ids;
- fixed: every prompt exactly --input-len tokens, every output exactly --output-len;
- sharegpt-like: lengths drawn from a log-normal fitted to ShareGPT's (median prompt ~ 220 tokens,
  median answer ~ 200, long tails), capped at --input-len / --output-len; ids random. No data set is
  downloaded: the shape of a chat workload without its text.
Requests start at --request-rate per second (Poisson arrivals; inf: all at once), at most
--max-concurrency in flight. Timing per request: TTFT = first streamed chunk with text; ITL = the gaps
between later chunks; TPOT = (E2E - TTFT) / (output tokens - 1); output tokens from the final usage
(stream_options.include_usage), else the chunks counted. Standard library only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import sys
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

SHAREGPT_PROMPT = (5.4, 1.0)  # log-normal (mu, sigma) of prompt tokens: median e^5.4 ~ 220
SHAREGPT_OUTPUT = (5.3, 0.9)  # of answer tokens: median ~ 200


@dataclass
class RequestResult:
    ok: bool
    prompt_len: int
    output_tokens: int = 0
    ttft: float | None = None
    itl: list[float] = field(default_factory=list)
    e2e: float = 0.0
    error: str | None = None


def make_requests(dataset: str, n: int, input_len: int, output_len: int, range_ratio: float, vocab: int,
                  seed: int) -> list[tuple[list[int], int]]:
    """[(prompt token ids, output tokens)], reproducible from the seed (ids avoid 0..2, the usual specials)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        if dataset == "fixed":
            p, o = input_len, output_len
        elif dataset == "random":
            p = rng.randint(max(1, int(input_len * range_ratio)), input_len)
            o = rng.randint(max(1, int(output_len * range_ratio)), output_len)
        elif dataset == "sharegpt-like":
            p = min(input_len, max(4, int(rng.lognormvariate(*SHAREGPT_PROMPT))))
            o = min(output_len, max(1, int(rng.lognormvariate(*SHAREGPT_OUTPUT))))
        else:
            raise SystemExit(f"--dataset {dataset!r} is not known; use random, fixed or sharegpt-like")
        out.append(([rng.randint(3, vocab - 1) for _ in range(p)], o))
    return out


class Target:
    def __init__(self, base_url: str, model: str | None, api_key: str | None):
        parts = urlsplit(base_url if "://" in base_url else f"http://{base_url}")
        if parts.scheme != "http":
            raise SystemExit(f"--base-url {base_url!r}: only http:// is supported (a local or tunnelled server)")
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.prefix = parts.path.rstrip("/")
        self.model, self.api_key = model, api_key

    def _head(self, method: str, path: str, body: bytes = b"") -> bytes:
        lines = [f"{method} {self.prefix}{path} HTTP/1.1", f"Host: {self.host}:{self.port}", "Connection: close",
                 "Accept: text/event-stream, application/json"]
        if self.api_key:
            lines.append(f"Authorization: Bearer {self.api_key}")
        if body:
            lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
        return ("\r\n".join(lines) + "\r\n\r\n").encode() + body

    async def open(self, method: str, path: str, payload: dict | None = None):
        """(status, headers, reader) of one request on a fresh connection."""
        reader, writer = await asyncio.open_connection(self.host, self.port, limit=1 << 20)
        writer.write(self._head(method, path, json.dumps(payload).encode() if payload is not None else b""))
        await writer.drain()
        status_line = (await reader.readline()).decode(errors="replace")
        try:
            status = int(status_line.split()[1])
        except (IndexError, ValueError):
            writer.close()
            raise ConnectionError(f"not an HTTP answer: {status_line!r}") from None
        headers = {}
        while True:
            line = (await reader.readline()).decode(errors="replace").strip()
            if not line:
                break
            key, _, value = line.partition(":")
            headers[key.strip().lower()] = value.strip()
        return status, headers, reader, writer

    async def get_json(self, path: str):
        status, headers, reader, writer = await self.open("GET", path)
        try:
            body = b"".join([part async for part in body_parts(reader, headers)])
        finally:
            writer.close()
        return status, json.loads(body or b"null")


async def body_parts(reader, headers):
    """The body's bytes as they arrive: chunked transfer decoded, else up to Content-Length or EOF."""
    if headers.get("transfer-encoding", "").lower() == "chunked":
        while True:
            size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                await reader.readline()
                return
            data = await reader.readexactly(size)
            await reader.readline()
            yield data
    elif "content-length" in headers:
        yield await reader.readexactly(int(headers["content-length"]))
    else:
        while data := await reader.read(65536):
            yield data


async def one_request(target: Target, prompt: list[int], max_tokens: int) -> RequestResult:
    payload = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0, "ignore_eos": True, "stream": True,
               "stream_options": {"include_usage": True}}
    if target.model:
        payload["model"] = target.model
    result = RequestResult(ok=False, prompt_len=len(prompt))
    start = time.perf_counter()
    writer = None
    try:
        status, headers, reader, writer = await target.open("POST", "/v1/completions", payload)
        if status != 200:
            body = b"".join([p async for p in body_parts(reader, headers)]).decode(errors="replace")
            result.error = f"HTTP {status}: {body[:200]}"
            return result
        last, chunks, usage, buffer = None, 0, None, b""
        async for part in body_parts(reader, headers):
            buffer += part
            while b"\n\n" in buffer:
                event, buffer = buffer.split(b"\n\n", 1)
                for line in event.split(b"\n"):
                    if not line.startswith(b"data:"):
                        continue
                    data = line[5:].strip()
                    if data == b"[DONE]":
                        continue
                    doc = json.loads(data)
                    if doc.get("usage"):
                        usage = doc["usage"]
                    if "error" in doc:
                        result.error = str(doc["error"])[:200]
                    if any(c.get("text") for c in doc.get("choices") or ()):
                        now = time.perf_counter()
                        if last is None:
                            result.ttft = now - start
                        else:
                            result.itl.append(now - last)
                        last, chunks = now, chunks + 1
        result.e2e = time.perf_counter() - start
        result.output_tokens = int(usage["completion_tokens"]) if usage else chunks
        result.ok = result.error is None and result.ttft is not None
        if result.ttft is None and result.error is None:
            result.error = "the stream carried no text"
    except (OSError, ConnectionError, asyncio.IncompleteReadError, ValueError) as err:
        result.error = f"{type(err).__name__}: {err}"
    finally:
        if writer is not None:
            writer.close()
        if not result.e2e:
            result.e2e = time.perf_counter() - start
    return result


async def run_level(target: Target, work, concurrency: int | None, rate: float, seed: int) -> tuple[list, float]:
    """Every request of `work`, at most `concurrency` at once, arriving at `rate` per second."""
    gate = asyncio.Semaphore(concurrency) if concurrency else None
    rng = random.Random(seed + 1)

    async def limited(prompt, n):
        if gate is None:
            return await one_request(target, prompt, n)
        async with gate:
            return await one_request(target, prompt, n)

    start = time.perf_counter()
    tasks = []
    for prompt, n in work:
        tasks.append(asyncio.create_task(limited(prompt, n)))
        if math.isfinite(rate) and rate > 0:
            await asyncio.sleep(rng.expovariate(rate))
    results = await asyncio.gather(*tasks)
    return results, time.perf_counter() - start


def percentiles(values: list[float], qs=(50, 90, 99)) -> dict:
    if not values:
        return {f"p{q}": None for q in qs} | {"mean": None}
    s = sorted(values)
    out = {f"p{q}": s[min(len(s) - 1, max(0, math.ceil(q / 100 * len(s)) - 1))] for q in qs}
    out["mean"] = sum(s) / len(s)
    return out


def summarise(results: list[RequestResult], seconds: float, concurrency, rate) -> dict:
    ok = [r for r in results if r.ok]
    out_tokens = sum(r.output_tokens for r in ok)
    tpot = [(r.e2e - r.ttft) / (r.output_tokens - 1) for r in ok if r.output_tokens > 1]
    return {
        "concurrency": concurrency, "request_rate": rate, "requests": len(results), "completed": len(ok),
        "errors": len(results) - len(ok), "first_errors": [r.error for r in results if not r.ok][:3],
        "seconds": seconds, "input_tokens": sum(r.prompt_len for r in ok), "output_tokens": out_tokens,
        "output_tok_s": out_tokens / seconds if seconds else 0.0, "request_s": len(ok) / seconds if seconds else 0.0,
        "output_tok_s_per_stream": (sum(r.output_tokens / r.e2e for r in ok if r.e2e) / len(ok)) if ok else None,
        "ttft_s": percentiles([r.ttft for r in ok]), "itl_s": percentiles([g for r in ok for g in r.itl]),
        "tpot_s": percentiles(tpot), "e2e_s": percentiles([r.e2e for r in ok]),
    }


def _ms(v) -> str:
    return "-" if v is None else f"{v * 1e3:,.1f}"


def table(rows: list[dict], baseline: float | None) -> str:
    head = ("| concurrent | requests | errors | output tok/s | per stream | req/s | TTFT p50 / p90 / p99 ms "
            "| ITL p50 / p90 / p99 ms | TPOT p50 / p99 ms | E2E p50 / p99 s |")
    if baseline:
        head += " share of in-process |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        t, i, p, e = r["ttft_s"], r["itl_s"], r["tpot_s"], r["e2e_s"]
        line = (f"| {r['concurrency'] or 'all'} | {r['requests']} | {r['errors']} | {r['output_tok_s']:,.0f} | "
                f"{r['output_tok_s_per_stream'] or 0:,.0f} | {r['request_s']:.2f} | "
                f"{_ms(t['p50'])} / {_ms(t['p90'])} / {_ms(t['p99'])} | {_ms(i['p50'])} / {_ms(i['p90'])} / "
                f"{_ms(i['p99'])} | {_ms(p['p50'])} / {_ms(p['p99'])} | "
                f"{(e['p50'] or 0):.2f} / {(e['p99'] or 0):.2f} |")
        if baseline:
            line += f" {r['output_tok_s'] / baseline:.0%} |"
        lines.append(line)
    return "\n".join(lines)


async def main_async(args) -> int:
    target = Target(args.base_url, args.model, args.api_key)
    vocab = args.vocab_size
    if vocab is None:  # ours says it in /server_info; other servers: --vocab-size
        try:
            status, info = await target.get_json("/server_info")
            vocab = int(info.get("vocab_size") or 0) if status == 200 and isinstance(info, dict) else 0
        except (OSError, ValueError):
            vocab = 0
        if not vocab:
            raise SystemExit("the server did not say its vocabulary size (/server_info); pass --vocab-size N")
    levels = [int(c) if c not in ("0", "all", "inf") else None for c in str(args.max_concurrency).split(",")]
    rows = []
    for k, concurrency in enumerate(levels):
        n = args.num_prompts if args.num_prompts else max(4, (concurrency or 64) * args.prompts_per_slot)
        work = make_requests(args.dataset, n, args.input_len, args.output_len, args.range_ratio, vocab, args.seed + k)
        if args.warmup:
            await run_level(target, [(p[:16], 4) for p, _ in work[:args.warmup]], None, math.inf, args.seed)
        results, seconds = await run_level(target, work, concurrency, args.request_rate, args.seed + k)
        row = summarise(results, seconds, concurrency, args.request_rate)
        row.update(dataset=args.dataset, input_len=args.input_len, output_len=args.output_len)
        rows.append(row)
        print(f"concurrency {concurrency or 'all'}: {row['completed']}/{row['requests']} requests in {seconds:.1f} s, "
              f"{row['output_tok_s']:,.0f} output tok/s, TTFT p50 {_ms(row['ttft_s']['p50'])} ms, ITL p50 / p99 "
              f"{_ms(row['itl_s']['p50'])} / {_ms(row['itl_s']['p99'])} ms, {row['errors']} errors",
              file=sys.stderr, flush=True)
    baselines = [float(b) for b in args.baseline_tok_s.split(",")] if args.baseline_tok_s else []
    if args.json:
        for row, base in zip(rows, baselines or [None] * len(rows)):
            row["baseline_tok_s"] = base
        print(json.dumps({"base_url": args.base_url, "rows": rows}, indent=2))
    else:
        print(table(rows, baselines[0] if len(baselines) == 1 else None))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"base_url": args.base_url, "args": vars(args), "rows": rows}, f, indent=2)
    return 0 if all(r["errors"] == 0 for r in rows) else 1


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base-url", default="http://127.0.0.1:30000")
    ap.add_argument("--model", default=None, help="the `model` field (default: none; our server takes any alias)")
    ap.add_argument("--api-key", default=None)
    ap.add_argument("--dataset", default="random", choices=("random", "fixed", "sharegpt-like"))
    ap.add_argument("--input-len", type=int, default=1024)
    ap.add_argument("--output-len", type=int, default=256)
    ap.add_argument("--range-ratio", type=float, default=1.0, help="random: lengths in [len * ratio, len] (default 1)")
    ap.add_argument("--num-prompts", type=int, default=None,
                    help="requests per level (default: --prompts-per-slot x the concurrency)")
    ap.add_argument("--prompts-per-slot", type=int, default=2)
    ap.add_argument("--max-concurrency", default="64", help="requests in flight; a comma list runs one level each")
    ap.add_argument("--request-rate", type=float, default=math.inf, help="requests per second, Poisson (default inf)")
    ap.add_argument("--vocab-size", type=int, default=None, help="token ids below this (default: /server_info's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=2, help="short requests sent before each level (not counted)")
    ap.add_argument("--baseline-tok-s", default=None,
                    help="in-process output tok/s of the same workload (one figure, or one per level, comma-separated)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--out", default=None, help="also write the results here (JSON)")
    return ap


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    if args.input_len < 1 or args.output_len < 1:
        raise SystemExit("--input-len and --output-len must be at least 1")
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
