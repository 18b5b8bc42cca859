"""Every fast op takes the arguments its reference takes, in the same order.

The fast modules import triton or fla, which a CPU machine lacks, so their signatures are read from
the source. A fast op that drops a keyword the models pass (softcap, sinks...) fails only on a GPU,
with a TypeError in the middle of a prefill; this catches it here.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from bringup.kernels.reference import OPS as REFERENCE_OPS
from bringup.kernels.triton.registration import FAST_OPS

KERNELS = Path(inspect.getfile(REFERENCE_OPS["rms_norm"])).parents[1]


def _fast_params(module: str, op: str) -> list[str]:
    tree = ast.parse((KERNELS / (module.replace(".", "/") + ".py")).read_text())
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == op:
            a = node.args
            return [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == op for t in node.targets):
            pytest.skip(f"{module}.{op} is an alias; its target is checked under its own name")
    raise AssertionError(f"kernels/{module}.py defines no function {op!r} (kernels/triton/registration.py names it)")


@pytest.mark.parametrize("op", sorted(FAST_OPS))
def test_fast_op_takes_the_reference_arguments_in_order(op):
    _, module, _ = FAST_OPS[op]
    want = list(inspect.signature(REFERENCE_OPS[op]).parameters)
    got = _fast_params(module, op)
    missing = [p for p in want if p not in got]
    assert not missing, f"{module}.{op} lacks {missing} that the reference takes ({want})"
    assert got[:len(want)] == want, f"{module}.{op} orders its arguments {got}, the reference {want}"
