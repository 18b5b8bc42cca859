"""The arguments that name what the embedded engine loads and where: shared by `serve` and `bench`."""

from __future__ import annotations

import argparse


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """SOURCE, --device and --dtype, with the same meaning in every command that runs the engine."""
    parser.add_argument("source", nargs="?", default=None,
                        help="model folder, catalogue name or hub id; omit (or 'default') for the bundled default model")
    parser.add_argument("--device", default="auto",
                        help="auto (an accelerator if there is one, else cpu), cpu, cuda, cuda:N, xpu or xpu:N")
    parser.add_argument("--dtype", default="auto", help="auto (the checkpoint's), float32, bfloat16 or float16")
    parser.add_argument("--load-format", default="auto", choices=("auto", "dummy"),
                        help="auto: the checkpoint's weights; dummy: the source's config (catalogue name, "
                             "config.json, folder, hub id) at full size with seeded random weights, made on the "
                             "device (nothing downloaded or written; the text is noise)")
