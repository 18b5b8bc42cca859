"""Device facts (issue 12): memory per real device, as one torch device, with a source each; the Plan
tab's presets and `--device-memory NAME` read the same list."""

from __future__ import annotations

import pytest

from bringup.core.planner.device import resolve_device_memory
from bringup.core.planner.device_presets import GIB, PRESETS, preset


def test_every_preset_has_a_source_and_a_device_kind():
    assert len({p.key for p in PRESETS}) == len(PRESETS)
    for p in PRESETS:
        assert p.source and p.device in ("cuda", "xpu", "cpu") and p.memory_gib > 0


def test_max_1550_is_two_64_gb_devices_in_flat_mode():
    max1550 = preset("Max-1550")
    assert max1550.memory_gib == 64 and max1550.per_card == 2 and max1550.device == "xpu"
    assert "FLAT" in max1550.source and "2 devices per card" in max1550.label


@pytest.mark.parametrize("key,gib", [("b60", 24), ("h100", 79.6), ("h200", 139.8), ("b200", 179.1)])
def test_real_devices(key, gib):
    assert preset(key).memory_gib == gib


def test_device_memory_by_name():
    device, size, notes = resolve_device_memory("max1550", "auto", "sglang==0.5.23")
    assert (device, size) == ("xpu", 64 * GIB) and "FLAT" in notes[0]
    assert resolve_device_memory("h200", "auto", "sglang")[0] == "cuda"
    assert resolve_device_memory("64GiB", "xpu", "sglang")[1] == 64 * GIB


def test_plan_tab_offers_the_presets_with_their_sources(qtbot):
    from PySide6.QtCore import Qt

    from bringup.app.tabs.plan_tab import PlanTab

    tab = PlanTab()
    qtbot.addWidget(tab)
    texts = [tab.preset.itemText(i) for i in range(tab.preset.count())]
    (index,) = [i for i, t in enumerate(texts) if "Max 1550" in t]
    assert tab.preset.itemData(index) == (64.0, "xpu")
    assert "FLAT" in tab.preset.itemData(index, Qt.ItemDataRole.ToolTipRole)
    tab.preset.setCurrentIndex(index)
    assert tab.memory.value() == 64.0 and tab.device.currentText() == "xpu"
