"""The Numerics tab: does the device compute what the reference computes? Each block against the
float32 CPU reference, every kernel against its plain version, and an SGLang dump folder (the page
itself is `numerics_panel.NumericsPanel`)."""

from __future__ import annotations

from .numerics_panel import NumericsPanel


class NumericsTab(NumericsPanel):
    title = "Numerics"
