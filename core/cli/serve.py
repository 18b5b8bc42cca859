"""`bringup serve [SOURCE] ...`: the embedded engine over HTTP (OpenAI and SGLang APIs, /metrics).

With no SOURCE (or `default`) it serves the bundled default model: a small random-weight
checkpoint with Nemotron-3-Nano's layer pattern, generated once into the user's cache.
"""

from __future__ import annotations

import argparse

from bringup.core.cli.engine_args import add_model_arguments, add_option
from bringup.core.engine import facts
from bringup.core.errors import UserError


def configure(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    for option in facts.SERVE_OPTIONS:  # the engine states its options once (core/engine/facts.py)
        if option.flag not in facts.MODEL_OPTIONS:
            add_option(parser, option)


def main(args: argparse.Namespace) -> int:
    from bringup.core.client.engine_lifetime import watch_parent_pipe

    watch_parent_pipe()  # started by the window: end with it, even if it is killed outright
    if not 0 <= args.port <= 65535:
        raise UserError(f"--port {args.port} is not a port; use 1-65535, or 0 for a free one")
    if args.mem_fraction is not None and not 0 < args.mem_fraction <= 1:
        raise UserError(f"--mem-fraction {args.mem_fraction:g} must be in (0, 1], e.g. --mem-fraction 0.8")
    if args.max_running_requests is not None and args.max_running_requests < 1:
        raise UserError(f"--max-running-requests {args.max_running_requests} must be at least 1")
    if args.chunked_prefill_size is not None and args.chunked_prefill_size < 1:
        raise UserError(f"--chunked-prefill-size {args.chunked_prefill_size} must be at least 1")
    if args.cpu_threads is not None and args.cpu_threads < 1:
        raise UserError(f"--cpu-threads {args.cpu_threads} must be at least 1")
    if args.api_key is not None and not args.api_key.strip():
        raise UserError("--api-key is empty; give a non-empty key or leave the option out")
    for flag in ("max_body_bytes", "max_prompts_per_request", "max_queued_requests", "max_queued_tokens"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            raise UserError(f"--{flag.replace('_', '-')} {value} must be at least 1")
    if args.drain_grace is not None and not 0 <= args.drain_grace <= 3600:
        raise UserError(f"--drain-grace {args.drain_grace:g} must be between 0 and 3600 seconds")
    from bringup.core.serve.access import resolve_api_key
    from bringup.core.serve.launch import serve

    api_key = resolve_api_key(args.api_key, args.api_key_file)
    limits = {"max_body_bytes": args.max_body_bytes, "max_prompts": args.max_prompts_per_request,
              "max_queued_requests": args.max_queued_requests, "max_queued_tokens": args.max_queued_tokens,
              "drain_grace_s": args.drain_grace}
    hosts = _names(args.allowed_hosts)

    return serve(args.source, device=args.device, dtype=args.dtype, host=args.host, port=args.port,
                 mem_fraction=args.mem_fraction, max_running_requests=args.max_running_requests,
                 api_key=api_key, served_model_name=args.served_model_name,
                 chunked_prefill_size=args.chunked_prefill_size, limits=limits, allowed_hosts=hosts,
                 model_aliases=_names(args.model_aliases), load_format=args.load_format,
                 cpu_threads=args.cpu_threads, cpu_compile=facts.cpu_compile_choice(args.cpu_compile))


def _names(text: str | None) -> tuple[str, ...]:
    """A comma-separated option as a tuple of names."""
    return tuple(n.strip() for n in (text or "").split(",") if n.strip())
