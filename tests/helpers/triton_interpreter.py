"""Run a script under Triton's interpreter in a child process (TRITON_INTERPRET is read at import),
the way the kernel tests check their Triton code on a CPU.

Triton 3.6's interpreter turns a loop bound it loaded at run time into a Python int through numpy;
numpy 2.3 and later refuse that for a one-element array ("only 0-dimensional arrays can be converted
to Python scalars"). Where that is what broke a script, the test is skipped with that reason (the
kernel is not at fault; pip install "numpy<2.3" beside triton runs it), and any other failure fails."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

_NUMPY_SCALAR_REFUSAL = "only 0-dimensional arrays can be converted to Python scalars"


def run_interpreted(script: str, *args: str, timeout: int = 300) -> str:
    """Run `script` (python -c) under the interpreter and return its stdout; fail with its output on a
    non-zero exit, or skip when the exit is the interpreter's numpy incompatibility."""
    pytest.importorskip("triton")
    helpers = os.path.dirname(os.path.abspath(__file__))  # (the scripts may import slot_pools and the like)
    env = {**os.environ, "TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join(p for p in (helpers, os.environ.get("PYTHONPATH")) if p)}
    done = subprocess.run([sys.executable, "-c", script, *args], env=env, capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode != 0 and _NUMPY_SCALAR_REFUSAL in done.stderr:
        import numpy

        pytest.skip(f"Triton's interpreter needs numpy < 2.3 for loops with run-time bounds; numpy "
                    f"{numpy.__version__} here (pip install 'numpy<2.3' to run this test)")
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    return done.stdout


def assert_interpreted_ok(script: str, *args: str, timeout: int = 300) -> None:
    """Run `script` under the interpreter; it must print "ok" as its last line."""
    out = run_interpreted(script, *args, timeout=timeout)
    assert out.strip().splitlines()[-1:] == ["ok"], out[-3000:]
