"""The main window's tabs, in order: the one place a tab is registered.

A tab is a QWidget class with
- `title`: the text on its tab;
- `set_layer_map(layer_map_or_None)`: called on every tab whenever a model loads (None: no model);
- optionally a Qt signal `highlight_requested(object)` carrying a `bringup.app.layermap.highlight.Highlight`
  (or None to clear): the window puts those red marks on the layer map;
- optionally `set_selected_layer(layer_or_None)`: called when the user selects a layer on the map;
- optionally a Qt signal `select_requested(int)`: the window selects that layer on the map;
- optionally `open_file(path)`: `bringup gui --tab TITLE --open FILE` hands it a file (a log...);
- optionally `set_launch_state(state)`: the window hands it its one `bringup.app.launch_state.LaunchState`
  (the launch settings Validate checks, Plan plans and Run starts).
`contract.py` writes these as `typing.Protocol`s.
Its constructor takes no arguments (or `parent=None`).

Register a tab with a one-line "module:Class" entry below; modules are imported only when the
window builds its tabs, so a slow import (pyqtgraph) never delays the first painted map.
"""

from __future__ import annotations

import importlib

TAB_FACTORIES: list[str] = [
    "bringup.app.tabs.layers_tab:LayersTab",
    "bringup.app.tabs.validate_tab:ValidateTab",
    "bringup.app.tabs.plan_tab:PlanTab",
    "bringup.app.tabs.run_tab:RunTab",
    "bringup.app.tabs.compare_tab:CompareTab",
    "bringup.app.tabs.numerics_tab:NumericsTab",
    "bringup.app.tabs.diagnose_tab:DiagnoseTab",
]


def load_factory(spec: str):
    """The class named by a "module:Class" entry."""
    module_name, _, class_name = spec.partition(":")
    module = importlib.import_module(module_name)
    return getattr(module, class_name)
