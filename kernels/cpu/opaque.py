"""The CPU kernels a compiled decode step calls as they are, registered as torch operators.

A compiled decode step (core/engine/cpu_compiled_decode.py) fuses the many small ops between the
products into a few loops. The products themselves, the MoE and the decode attention decide things
on the host at every call (MKL or a packed oneDNN copy by the number of rows, the MoE's form by the
batch's width, copies kept on the weights): traced, those decisions would be frozen into the graph
or break it. So each is defined here as an operator of the `bringup_cpu` library, opaque to the
compiler, whose CPU implementation is the plain Python function: the compiled step calls it as an
external kernel and every decision is still made at run time, with the same code as eager steps.

`opaque(schema, fake)` wraps a kernel: outside a compile the wrapper calls the function directly
(nothing changes for eager steps); while torch.compile traces, it calls the operator, whose `fake`
gives the output's shape and dtype without running it (a new contiguous tensor: the operator makes
its result contiguous to match).
"""

from __future__ import annotations

import functools
from typing import Callable

import torch

LIBRARY = "bringup_cpu"
_LIB = torch.library.Library(LIBRARY, "DEF")


def opaque(schema: str, fake: Callable) -> Callable[[Callable], Callable]:
    """Register the decorated function as operator `bringup_cpu::<its name><schema>` on the CPU."""

    def wrap(fn: Callable) -> Callable:
        name = fn.__name__
        _LIB.define(f"{name}{schema}")
        # Contiguous results, as the fakes promise: the compiled code indexes them by the fake's strides.
        _LIB.impl(name, lambda *args, **kwargs: fn(*args, **kwargs).contiguous(), "CPU")
        torch.library.register_fake(f"{LIBRARY}::{name}", fake, lib=_LIB)
        op = getattr(getattr(torch.ops, LIBRARY), name).default

        @functools.wraps(fn)
        def call(*args, **kwargs):
            if torch.compiler.is_compiling():
                return op(*args, **kwargs)
            return fn(*args, **kwargs)

        call.operator = op
        return call

    return wrap
