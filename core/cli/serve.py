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
    from bringup.core.engine.config import EngineConfig

    config = EngineConfig.from_args(args)  # checks the engine's numbers (--mem-fraction...) before anything loads
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

    return serve(config, host=args.host, port=args.port, api_key=api_key, served_model_name=args.served_model_name,
                 limits=limits, allowed_hosts=hosts, model_aliases=_names(args.model_aliases))


def _names(text: str | None) -> tuple[str, ...]:
    """A comma-separated option as a tuple of names."""
    return tuple(n.strip() for n in (text or "").split(",") if n.strip())
