"""Known faults injected into one run of a layer-level A/B, so that the comparison is shown to find
them at the right block and step (as `bringup compare --perturb-layer` does for one prefill).

    scale@L=F   block L's output multiplied by F at every step (a wrong scale in one layer)
    state@L     after every step, layer L's conv state shifted by one position (an off-by-one in
                the window update): that step's output is right, every later step reads a wrong state
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bringup.core.errors import UserError

_FAULT = re.compile(r"^(scale)@(\d+)=([0-9.eE+-]+)$|^(state)@(\d+)$")


@dataclass(frozen=True)
class Fault:
    kind: str  # "scale" or "state"
    layer: int
    factor: float = 1.0

    def __str__(self) -> str:
        return f"scale@{self.layer}={self.factor:g}" if self.kind == "scale" else f"state@{self.layer}"


def parse_fault(text: str | None) -> Fault | None:
    if not text:
        return None
    m = _FAULT.match(text.strip())
    if not m:
        raise UserError(f"fault {text!r} is not one of scale@LAYER=FACTOR (e.g. scale@3=1.05) or state@LAYER (e.g. state@0)")
    if m.group(1):
        return Fault("scale", int(m.group(2)), float(m.group(3)))
    return Fault("state", int(m.group(5)))


def shift_conv_state(conv, slot: int) -> None:
    """The off-by-one: the conv window of `slot` moved one position too far (its oldest column lost)."""
    window = conv[slot]
    window.copy_(window.roll(-1, dims=-1))
