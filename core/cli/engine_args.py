"""The arguments that name what the embedded engine loads and where: shared by `serve` and `bench`."""

from __future__ import annotations

import argparse

from bringup.core.engine import facts


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """SOURCE, --device and --dtype, with the same meaning in every command that runs the engine."""
    parser.add_argument("source", nargs="?", default=None,
                        help="model folder, catalogue name or hub id; omit (or 'default') for the bundled default model")
    for flag in facts.MODEL_OPTIONS:
        add_option(parser, facts.serve_option(flag))


def add_option(parser: argparse.ArgumentParser, option: facts.ServeOption) -> None:
    parser.add_argument(option.flag, type=option.type, default=option.default, help=option.help)
