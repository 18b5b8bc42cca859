#!/usr/bin/env python3
"""Adding (or re-checking) an SGLang release, in one command:

    python tools/oracle/add_release.py 0.5.24

1. downloads the wheel (`pip download --no-deps`) and reads its rule facts (tools/sglang_facts.py):
   with a profile for it, the comparison; without one, the profile entry to paste into
   core/rules/sglang_releases.py (then run this again);
2. builds the release's oracle environment (tools/oracle/envs.py);
3. runs the differential matrix (tools/oracle/matrix.py), shows what changed against the committed
   table and every disagreement with `bringup validate`, and writes tests/data/oracle/sglang-<ver>.jsonl.
Exit 1 while facts differ or cells disagree: fix core/rules, or explain the cell in tools/oracle/limits.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(__doc__)
        return 2
    version = args[0]
    sys.path.insert(0, str(HERE))
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
    print(f"\n== oracle matrix for sglang {version}", flush=True)
    done = subprocess.run([sys.executable, str(HERE / "matrix.py"), "sglang", version, "--diff", "--write"],
                          capture_output=True, text=True)
    print(done.stdout + done.stderr)
    disagree = " 0 disagree" not in done.stdout
    return 1 if facts_rc or done.returncode or disagree else 0


if __name__ == "__main__":
    raise SystemExit(main())
