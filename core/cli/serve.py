"""`bringup serve [SOURCE] ...`: the embedded engine over HTTP (OpenAI and SGLang APIs, /metrics).

With no SOURCE (or `default`) it serves the bundled default model: a small random-weight
checkpoint with Nemotron-3-Nano's layer pattern, generated once into the user's cache.
"""

from __future__ import annotations

import argparse

from bringup.core.cli.engine_args import add_model_arguments
from bringup.core.errors import UserError


def configure(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=30000, help="port (default 30000; 0 picks a free one)")
    parser.add_argument("--mem-fraction", type=float, default=None,
                        help="share of device memory for weights and pools (default: the planner's choice)")
    parser.add_argument("--max-running-requests", type=int, default=None, help="cap on requests running at once")
    parser.add_argument("--chunked-prefill-size", type=int, default=None, help="prompt tokens per step (chunk size)")
    parser.add_argument("--api-key", default=None,
                        help="require 'Authorization: Bearer KEY' on every route but /health and /ready "
                             "(visible in `ps`: prefer --api-key-file or $BRINGUP_API_KEY)")
    parser.add_argument("--api-key-file", default=None, metavar="PATH", help="read the API key from this file")
    parser.add_argument("--served-model-name", default=None, help="name reported by /v1/models")
    parser.add_argument("--model-alias", action="append", default=[], metavar="NAME",
                        help="another name a request's `model` may use (repeatable; 'default' and the source "
                             "path are always accepted)")
    parser.add_argument("--allowed-hosts", default="", metavar="NAMES",
                        help="comma-separated host names accepted in the Host header besides localhost and IP "
                             "addresses ('*': any); guards against DNS rebinding")
    parser.add_argument("--max-body-bytes", type=int, default=None,
                        help="largest request body (default: from the pools, 1-16 MiB); bigger gets 413")
    parser.add_argument("--max-prompts-per-request", type=int, default=None,
                        help="most prompts in one request (default: running + queued requests)")
    parser.add_argument("--max-queued-requests", type=int, default=None,
                        help="requests admitted beyond those running; more get 429 (default: max(64, 8 x running))")
    parser.add_argument("--max-queued-tokens", type=int, default=None,
                        help="tokens of work (prompt + max_tokens) admitted at once; more get 429 "
                             "(default: 8 x the KV pool)")
    parser.add_argument("--drain-grace", type=float, default=None, metavar="SECONDS",
                        help="on SIGTERM/SIGINT, how long running requests get to finish (default 30)")


def main(args: argparse.Namespace) -> int:
    if not 0 <= args.port <= 65535:
        raise UserError(f"--port {args.port} is not a port; use 1-65535, or 0 for a free one")
    if args.mem_fraction is not None and not 0 < args.mem_fraction <= 1:
        raise UserError(f"--mem-fraction {args.mem_fraction:g} must be in (0, 1], e.g. --mem-fraction 0.8")
    if args.max_running_requests is not None and args.max_running_requests < 1:
        raise UserError(f"--max-running-requests {args.max_running_requests} must be at least 1")
    if args.chunked_prefill_size is not None and args.chunked_prefill_size < 1:
        raise UserError(f"--chunked-prefill-size {args.chunked_prefill_size} must be at least 1")
    if args.api_key is not None and not args.api_key.strip():
        raise UserError("--api-key is empty; give a non-empty key or leave the option out")
    for flag in ("max_body_bytes", "max_prompts_per_request", "max_queued_requests", "max_queued_tokens"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            raise UserError(f"--{flag.replace('_', '-')} {value} must be at least 1")
    if args.drain_grace is not None and not 0 <= args.drain_grace <= 3600:
        raise UserError(f"--drain-grace {args.drain_grace:g} must be between 0 and 3600 seconds")
    from bringup.core.engine.api_access import resolve_api_key
    from bringup.core.engine.launch import serve

    api_key = resolve_api_key(args.api_key, args.api_key_file)
    limits = {"max_body_bytes": args.max_body_bytes, "max_prompts": args.max_prompts_per_request,
              "max_queued_requests": args.max_queued_requests, "max_queued_tokens": args.max_queued_tokens,
              "drain_grace_s": args.drain_grace}
    hosts = tuple(h.strip() for h in args.allowed_hosts.split(",") if h.strip())

    return serve(args.source, device=args.device, dtype=args.dtype, host=args.host, port=args.port,
                 mem_fraction=args.mem_fraction, max_running_requests=args.max_running_requests,
                 api_key=api_key, served_model_name=args.served_model_name,
                 chunked_prefill_size=args.chunked_prefill_size, limits=limits, allowed_hosts=hosts,
                 model_aliases=tuple(args.model_alias))
