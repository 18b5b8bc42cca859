"""The contracts a tab keeps with the main window, written as `typing.Protocol`s so a tab is
checked by what it offers, not by what it inherits (see `bringup.app.tabs` for the prose)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from bringup.core.layermap.vocabulary import LayerMap


@runtime_checkable
class Tab(Protocol):
    """Every tab: a title and the model the window shows (None: no model)."""

    title: str

    def set_layer_map(self, layer_map: LayerMap | None) -> None: ...


@runtime_checkable
class SharesLaunchSettings(Protocol):
    """A tab that edits or reads the window's one `LaunchState` (Validate, Plan, Run)."""

    def set_launch_state(self, state) -> None: ...
