#!/usr/bin/env python3
"""Maintainer/user script: put an engine release's wheel where Diagnose reads engine frames' source.

    python tools/engine_source.py vllm 0.10.2
    python tools/engine_source.py sglang 0.5.23

Downloads the wheel with `pip download --no-deps` (only the package index is contacted; the engine is
never installed or imported) into ~/.cache/bringup/sources/ (or $BRINGUP_ENGINE_SOURCES). Diagnose then
shows the code around a traceback's innermost sglang/vllm frame for logs of that release.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("engine", choices=["vllm", "sglang"])
    ap.add_argument("version")
    args = ap.parse_args()
    from bringup.core.diagnosis.engine_source import sources_root

    folder = sources_root()
    folder.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", f"{args.engine}=={args.version}", "-d", str(folder)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        print(f"could not download {args.engine}=={args.version}:\n{done.stderr.strip()}", file=sys.stderr)
        return 1
    print(f"{args.engine} {args.version} is in {folder}; Diagnose shows its source for frames of logs of this release")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
