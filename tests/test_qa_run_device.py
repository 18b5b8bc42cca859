"""The Run tab launches on this machine: a device Validate checked as a what-if, but the probe did not find, becomes 'auto'."""

from pathlib import Path

from bringup.app.tabs.run_tab import RunTab

SHARED = Path(__file__).resolve().parents[2] / "shared" / "models"


def test_a_device_this_machine_lacks_is_not_carried_into_the_run_tab(qtbot):
    tab = RunTab()
    qtbot.addWidget(tab)
    tab.apply_launch_settings({"target": "embedded", "device": "xpu"})  # before the probe: taken as asked
    assert tab.device.currentText() == "xpu"
    tab.set_available_devices(["cpu"])
    assert tab.device.currentText() == "auto"
    tab.apply_launch_settings({"target": "embedded", "device": "xpu"})
    assert tab.device.currentText() == "auto"
    tab.apply_launch_settings({"target": "embedded", "device": "cpu"})
    assert tab.device.currentText() == "cpu"


def test_a_device_the_user_picks_in_the_run_tab_stays(qtbot):
    tab = RunTab()
    qtbot.addWidget(tab)
    tab.device.setCurrentText("cuda")
    tab.device.activated.emit(tab.device.currentIndex())  # what a pick from the list sends
    tab.set_available_devices(["cpu"])
    assert tab.device.currentText() == "cuda"


def test_window_hands_the_probe_devices_to_the_run_tab(qtbot, monkeypatch):
    from bringup.app import tabs as tab_registry
    from bringup.app.main_window import MainWindow
    from bringup.app.tabs.validate_tab import ValidateTab

    monkeypatch.setattr(tab_registry, "TAB_FACTORIES", ["bringup.app.tabs.validate_tab:ValidateTab",
                                                        "bringup.app.tabs.run_tab:RunTab"])
    monkeypatch.setattr(ValidateTab, "PROBE_OPTIONS", {"steps": ["python", "cpu"], "timeout": 30})
    w = MainWindow()
    qtbot.addWidget(w)
    w.show()
    with qtbot.waitSignal(w.settled, timeout=10000):
        w.load(str(SHARED / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B.json"))
    validate, run = w.tab("Validate"), w.tab("Run")
    qtbot.waitUntil(lambda: validate.probe_report is not None, timeout=30000)
    lacking = next(d for d in ("xpu", "cuda") if d not in validate.probe_report.available_devices())
    validate.set_settings(target="embedded", device=lacking)
    validate.validate()
    assert run.available_devices is not None and run.device.currentText() == "auto"
    validate.probe_runner.stop()
    w.close()
    w.loader.wait()
