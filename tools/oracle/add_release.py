#!/usr/bin/env python3
"""Adding (or re-checking) an SGLang or vLLM release, in one command:

    python tools/oracle/add_release.py 0.5.24          # SGLang (the engine may be omitted)
    python tools/oracle/add_release.py vllm 0.34.0     # vLLM

SGLang:
1. downloads the wheel (`pip download --no-deps`) and reads its rule facts (tools/sglang_facts.py):
   with a profile for it, the comparison; without one, the profile entry to paste into
   core/rules/sglang_releases.py (then run this again);
2. builds the release's oracle environment (tools/oracle/envs.py);
3. runs the differential matrix (tools/oracle/matrix.py), shows what changed against the committed
   table and every disagreement with `bringup validate`, and writes tests/data/oracle/sglang-<ver>.jsonl.
vLLM: checks every fact core/ cites against the release's source (tools/vllm_facts.py, with --find
where the rules were read from another release: where each fact is now), then steps 2-3 with vLLM's
`vllm serve` parser, engine config and block alignment (probe_vllm.py), writing vllm-<ver>.jsonl.
Exit 1 while facts differ or cells disagree: fix core/rules, or explain the cell in tools/oracle/limits.py
(SGLang) or tools/oracle/vllm_limits.py (vLLM).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _matrix(engine: str, version: str) -> bool:
    """Run the matrix, print its report; whether every cell agrees."""
    print(f"\n== oracle matrix for {engine} {version}", flush=True)
    done = subprocess.run([sys.executable, str(HERE / "matrix.py"), engine, version, "--diff", "--write"],
                          capture_output=True, text=True)
    print(done.stdout + done.stderr)
    return done.returncode == 0 and " 0 disagree" in done.stdout


def _vllm(version: str) -> int:
    from bringup.core.rules.vllm_facts import READ_VERSION

    facts = [sys.executable, str(HERE.parent / "vllm_facts.py"), version] + ([] if version == str(READ_VERSION) else
                                                                              ["--find"])
    print("== facts: " + " ".join(facts[1:]), flush=True)
    facts_rc = subprocess.run(facts).returncode
    return 1 if not _matrix("vllm", version) or facts_rc else 0


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] in (["sglang"], ["vllm"]):
        engine, args = args[0], args[1:]
    else:
        engine = "sglang"
    if len(args) != 1:
        print(__doc__)
        return 2
    version = args[0]
    sys.path.insert(0, str(HERE))
    import envs

    envs.wheel(engine, version)  # a release the index does not have stops here, saying so
    if engine == "vllm":
        return _vllm(version)
    from bringup.core.rules.profiles import profile_for
    from bringup.core.versions import release

    known = (profile := profile_for(release(version))) is not None and profile.label == version
    facts = [sys.executable, str(HERE.parent / "sglang_facts.py"), version] + ([] if known else ["--emit"])
    print("== facts: " + " ".join(facts[1:]), flush=True)
    facts_rc = subprocess.run(facts).returncode
    if not known:
        print(f"\nno profile for sglang {version} yet: paste the entry above into core/rules/sglang_releases.py, "
              "review it, and run this again")
        return 1
    return 1 if not _matrix("sglang", version) or facts_rc else 0


if __name__ == "__main__":
    raise SystemExit(main())
