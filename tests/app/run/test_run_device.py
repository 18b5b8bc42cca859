"""The Run tab launches on this machine: a device Validate checked as a what-if, but the probe did not find, becomes 'auto'."""

from gui_helpers import window_on_nano

from bringup.app.tabs.run_tab import RunTab
from bringup.core.launch import Launch
from bringup.core.rules.settings import LaunchSettings


def _on(device):
    return Launch("embedded", "default", LaunchSettings(device=device))


def test_a_device_this_machine_lacks_is_not_carried_into_the_run_tab(qtbot):
    tab = RunTab()
    qtbot.addWidget(tab)
    tab.apply_launch(_on("xpu"))  # before the probe: taken as asked
    assert tab.device.currentText() == "xpu"
    tab.set_available_devices(["cpu"])
    assert tab.device.currentText() == "auto"
    tab.apply_launch(_on("xpu"))
    assert tab.device.currentText() == "auto"
    tab.apply_launch(_on("cpu"))
    assert tab.device.currentText() == "cpu"


def test_a_device_the_user_picks_in_the_run_tab_stays(qtbot):
    tab = RunTab()
    qtbot.addWidget(tab)
    tab.device.setCurrentText("cuda")
    tab.device.activated.emit(tab.device.currentIndex())  # what a pick from the list sends
    tab.set_available_devices(["cpu"])
    assert tab.device.currentText() == "cuda"


def test_window_hands_the_probe_devices_to_the_run_tab(qtbot, monkeypatch):
    w = window_on_nano(qtbot, monkeypatch, "bringup.app.tabs.validate_tab:ValidateTab", "bringup.app.tabs.run_tab:RunTab")
    validate, run = w.tab("Validate"), w.tab("Run")
    qtbot.waitUntil(lambda: validate.probe_report is not None, timeout=30000)
    lacking = next(d for d in ("xpu", "cuda") if d not in validate.probe_report.available_devices())
    validate.set_settings(target="embedded", device=lacking)
    validate.validate()
    assert run.available_devices is not None and run.device.currentText() == "auto"
    validate.probe_runner.stop()
    w.close()
    w.loader.wait()
