"""Run's SGLang launch offers per-layer tensor dumps: a checkbox and a folder, turned into
--debug-tensor-dump-output-folder by core/launch/sglang.py for the releases that write Pass files."""

from __future__ import annotations

import pytest

from bringup.app.tabs.run_tab import RunTab
from bringup.core.launch import Launch, shell
from bringup.core.launch import sglang as sglang_launch
from bringup.core.launch.sglang import TensorDumpUnsupported
from bringup.core.rules.settings import LaunchSettings

FLAG = "--debug-tensor-dump-output-folder"


def test_the_flag_is_given_for_releases_that_write_dumps_and_refused_before():
    settings = LaunchSettings(device="xpu")
    plain = Launch("sglang", "m", settings, engine_version="0.5.23").argv()
    assert FLAG not in plain
    argv = Launch("sglang", "m", settings, tensor_dump="/data/dump", engine_version="0.5.17").argv()
    assert argv[argv.index(FLAG) + 1] == "/data/dump" and argv[:len(plain)] == plain
    assert FLAG in Launch("sglang", "m", settings, tensor_dump="/d", engine_version="0.5.5").argv()
    with pytest.raises(TensorDumpUnsupported, match="SGLang 0.5.4 writes no per-layer tensor dumps"):
        Launch("sglang", "m", settings, tensor_dump="/d", engine_version="0.5.4").argv()
    assert Launch("sglang", "m", settings, tensor_dump="/d").to_json()["tensor_dump"] == "/d"


def test_run_offers_the_dump_for_sglang_only_and_starts_with_it(qtbot, monkeypatch, tmp_path):
    tab = RunTab()
    qtbot.addWidget(tab)
    tab.show()
    assert not tab.dump_option.isVisible()  # the embedded engine: no such option
    tab.engine.setCurrentIndex(1)  # SGLang (disabled in the list when not installed, but settable)
    assert tab.dump_option.isVisible() and not tab.dump_option.folder.isEnabled()
    tab.dump_option.enabled.setChecked(True)
    tab.dump_option.folder.setText(str(tmp_path / "dump"))
    started = []
    monkeypatch.setattr(tab.controller, "start", lambda launch, **_where: started.append(launch))
    tab.start()
    [launch] = started
    assert launch.engine == "sglang" and launch.tensor_dump == str(tmp_path / "dump")
    monkeypatch.setattr(sglang_launch, "installed_version", lambda: "0.5.23")
    assert f"{FLAG} {tmp_path / 'dump'}" in shell(launch.argv())


def test_an_sglang_too_old_for_dumps_is_said_at_start(qtbot, monkeypatch):
    tab = RunTab()
    qtbot.addWidget(tab)
    tab.engine.setCurrentIndex(1)
    tab.dump_option.enabled.setChecked(True)
    monkeypatch.setattr(sglang_launch, "installed_version", lambda: "0.5.4")
    tab.start()  # refused while building the command: no process is started
    assert not tab.controller.busy
    assert "SGLang 0.5.4 writes no per-layer tensor dumps" in tab.reason.text()


def test_the_dump_folder_is_handed_to_the_numerics_tab(qtbot, monkeypatch, tmp_path):
    from gui_helpers import window_on_nano

    w = window_on_nano(qtbot, monkeypatch, "bringup.app.tabs.numerics_tab:NumericsTab", "bringup.app.tabs.run_tab:RunTab")
    run, numerics = w.tab("Run"), w.tab("Numerics")
    run.engine.setCurrentIndex(1)
    run.dump_option.enabled.setChecked(True)
    run.dump_option.folder.setText(str(tmp_path / "dump"))
    monkeypatch.setattr(run.controller, "start", lambda launch, **_where: None)
    run.start()
    assert numerics.dump_folder.text() == str(tmp_path / "dump")  # one click from "Compare dump"
