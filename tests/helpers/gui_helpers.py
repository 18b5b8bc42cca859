"""Shared bits of the GUI tests: where the real configs live, and small model files of our own."""

from __future__ import annotations

import json
from pathlib import Path

from repo_paths import SHARED_MODELS

NANO = "NVIDIA-Nemotron-3-Nano-30B-A3B"  # catalogue name, works offline
NEMOTRON_H_56B = SHARED_MODELS / "nvidia__Nemotron-H-56B-Base-8K.json"
NANO_ATTENTION = [5, 12, 19, 26, 33, 42]


def write_mtp_config(folder: Path) -> Path:
    """A small NemotronH config with two MTP blocks, written as a model folder."""
    config = json.loads((SHARED_MODELS / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B.json").read_text())  # Python reads the bare Infinity
    config["mtp_hybrid_override_pattern"] = "*E"
    config["num_nextn_predict_layers"] = 1
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def window_on_nano(qtbot, monkeypatch, *tabs: str):
    """A shown MainWindow with only `tabs` ("module:Class"), a two-step probe, and Nemotron-3-Nano
    loaded from its real config: for tests of how the tabs feed each other."""
    from bringup.app import tabs as tab_registry
    from bringup.app.main_window import MainWindow
    from bringup.app.tabs.validate_tab import ValidateTab

    monkeypatch.setattr(tab_registry, "TAB_FACTORIES", list(tabs))
    monkeypatch.setattr(ValidateTab, "PROBE_OPTIONS", {"steps": ["python", "cpu"], "timeout": 30})
    window = MainWindow()
    qtbot.addWidget(window)
    window.show()
    with qtbot.waitSignal(window.settled, timeout=10000):
        window.load(str(SHARED_MODELS / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B.json"))
    return window


def cell_colour(panel, index: int) -> str:
    """The fill of block `index`'s present part, away from its letter."""
    image = panel.view.grab().toImage()
    cell = panel.view.map_layout().cell_of(("layer", index))
    rect = cell.mixer_rect if cell.layer.mixer != "none" else cell.ffn_rect
    return image.pixelColor(int(rect.left() + 3), int(rect.top() + 3)).name().upper()


# The end of an SGLang log that crashed on layer 0 (PR #32227): Diagnose finds it on line 5.
LAYER0_LOG = """\
[2026-07-23 10:00:04 TP0] Load weight begin. avail mem=22.10 GB
Traceback (most recent call last):
  File "/opt/sglang/python/sglang/srt/layers/attention/triton_backend.py", line 101, in __init__
    self.v_head_dim = model_runner.token_to_kv_pool.get_value_buffer(0).shape[-1]
ValueError: layer_id=0 not in full attention layers: dict_keys([5, 12, 19, 26, 33, 42])
"""
