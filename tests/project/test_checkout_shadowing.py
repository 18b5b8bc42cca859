"""A checkout's bare room folders never stand in for real packages of the same names.

The rooms live at the checkout's root as core/, app/, kernels/ (mapped onto bringup.*). `python -m
bringup ...` or `python -c` run from the root put the root on sys.path, where the bare kernels/
shadowed Hugging Face's `kernels`, which transformers 5.25 depends on: `bringup bench` died with
"cannot import name 'CUDAProperties' from 'kernels'". Importing bringup takes the root off again.
"""

from __future__ import annotations

import os
import subprocess
import sys

from repo_paths import REPO

_PROBE = """
import importlib.util, sys
before = importlib.util.find_spec("kernels")
import bringup
after = importlib.util.find_spec("kernels")
print(before.origin if before else None)
print(after.origin if after else None)
"""


def test_importing_bringup_from_the_checkout_root_unshadows_kernels():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONSAFEPATH"}  # as a user's shell has it
    done = subprocess.run([sys.executable, "-c", _PROBE], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    before, after = done.stdout.split("\n")[:2]
    ours = str(REPO / "kernels" / "__init__.py")
    assert before == ours  # the shadow is real from the root...
    assert after != ours  # ...and gone once bringup is imported


def test_transformers_imports_from_the_checkout_root_after_bringup():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONSAFEPATH"}
    code = "import bringup, transformers.activations; print('ok')"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
