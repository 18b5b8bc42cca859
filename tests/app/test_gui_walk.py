"""The walk of issue 33, in one real window: switch models and see the header, map, chat, demo and
report follow; New chat; the demo of SmolLM2 (real weights, fetched from the package index); the
report's served-model section; the Plan overflow on a 24 GiB device with its TP; Quit asks.

Two real engines, one after the other (the bundled miniature, then SmolLM2 when its GGUF is here),
each ended before the next. With BRINGUP_WALK_SHOTS=FOLDER each step is also saved as a PNG there:

    xvfb-run -a -s "-screen 0 1440x900x24" env QT_QPA_PLATFORM=xcb BRINGUP_WALK_SHOTS=docs/walk \\
        .venv/bin/python -m pytest -q tests/app/test_gui_walk.py
"""

from __future__ import annotations

import os
from pathlib import Path

import psutil
import pytest
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QTextBrowser

from repo_paths import SHARED_MODELS

NANO = SHARED_MODELS / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B.json"
pytestmark = pytest.mark.slow


class Shots:
    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)

    def take(self, name: str, widget) -> None:
        if self.folder is None:
            return
        QApplication.processEvents()
        # The widget's own paint (all its children, freshly drawn): a grab of the X screen can catch
        # a view before its repaint reached the server.
        assert widget.grab().save(str(self.folder / f"{name}.png"))


def _children():
    return [p for p in psutil.Process().children(recursive=True) if p.status() != psutil.STATUS_ZOMBIE]


def _start(qtbot, run, source: str) -> None:
    run.model_field.setText(source)
    run.device.setCurrentText("cpu")
    with qtbot.waitSignal(run.controller.ready, timeout=300000):
        run.start()
    qtbot.waitUntil(lambda: run.served is not None, timeout=30000)


def _chat(qtbot, run, prompt: str, tokens: int = 16) -> dict:
    before = len(run.chat.samples)
    run.chat.max_tokens.setValue(tokens)
    run.chat.temperature.setValue(0.0)
    run.chat.send(prompt)
    qtbot.waitUntil(lambda: len(run.chat.samples) > before, timeout=120000)
    return run.chat.samples[-1]


def test_the_window_follows_what_runs(qtbot, monkeypatch, tmp_path):
    from bringup.app.main_window import MainWindow
    from bringup.app.tabs.validate_tab import ValidateTab
    from bringup.core.sources.packaged import cached_path

    shots = Shots(Path(os.environ["BRINGUP_WALK_SHOTS"]) if os.environ.get("BRINGUP_WALK_SHOTS") else None)
    monkeypatch.setattr(ValidateTab, "PROBE_OPTIONS", {"steps": ["python", "cpu"], "timeout": 30})
    window = MainWindow()
    qtbot.addWidget(window)
    window.resize(1440, 900)
    window.show()
    qtbot.waitExposed(window)
    run = None
    try:
        with qtbot.waitSignal(window.settled, timeout=20000):
            window.load("default")
        run = window.tab("Run")
        window.tabs.setCurrentWidget(run)

        # 1. The miniature runs: the header names it, the map is its map, the chat says its answers are noise.
        _start(qtbot, run, "default")
        assert window.running.isVisible() and not window.running.mismatch
        assert run.served.random_weights and "Random weights" in run.chat.who.text()
        run.side.setCurrentWidget(run.chat)
        answer = _chat(qtbot, run, "Hello, who are you?")
        assert answer["model"] == run.served.name and answer["random_weights"]
        qtbot.waitUntil(lambda: run.plots.panel_has_data("State pool"), timeout=15000)
        shots.take("1-running-miniature-chat", window)

        # 1b. Numerics, a tab of its own: the miniature's kernels on this CPU, device kernels counted apart.
        numerics = window.tab("Numerics")
        window.tabs.setCurrentWidget(numerics)
        with qtbot.waitSignal(numerics.kernels_finished, timeout=300000) as checked:
            assert numerics.start("check-kernels")
        assert isinstance(checked.args[0], dict), checked.args[0]
        assert "device kernel" in numerics.status.text()
        shots.take("7-numerics-tab", window)
        window.tabs.setCurrentWidget(run)

        # 2. The header switches to another model: the badge says the map is not the running model.
        smollm2 = cached_path("smollm2")
        second = str(smollm2) if smollm2 is not None else str(NANO)
        with qtbot.waitSignal(window.settled, timeout=30000):
            window.load(second)
        assert window.running.mismatch and "The map is not the running model" in window.running.text.text()
        shots.take("2-map-is-not-the-running-model", window)
        with qtbot.waitSignal(run.controller.stopped, timeout=30000):
            run.stop()
        assert not window.running.isVisible()
        if smollm2 is None:
            pytest.skip("SmolLM2 is not fetched (bringup models fetch smollm2): the walk stops at the switch")

        # 3. SmolLM2 runs (the Run tab's model follows the header): a new chat, its name in the request.
        assert run.model_field.text() == str(smollm2)
        _start(qtbot, run, run.model_field.text())
        assert not window.running.mismatch and not run.served.random_weights
        assert "SmolLM2" in run.chat.who.text() and "was not sent to it" in run.chat.transcript.toPlainText()
        assert run.chat.messages == []
        answer = _chat(qtbot, run, "What is the capital of France?", tokens=24)
        assert answer["model"] == run.served.name and "Paris" in answer["answer"]
        assert not run.plots.panel_visible("State pool")  # attention only: no state-pool graph
        shots.take("3-smollm2-new-chat", window)
        run.chat.new_button.click()
        assert run.chat.messages == []

        # 4. The demo of what runs: its name, device and map; no noise banner for real weights.
        monkeypatch.setattr("bringup.app.demo.DemoWindow.showFullScreen", lambda self: self.show())
        run.open_demo()
        demo = run._demo
        demo.resize(1440, 900)
        assert demo.title.text().startswith(run.served.name) and not demo.noise.isVisible()
        assert demo.width() <= 1440  # fits the screen it is shown on
        qtbot.waitUntil(lambda: demo.big.text() not in ("\u2014", ""), timeout=60000)
        qtbot.waitUntil(lambda: len([a for a in demo.answers.values() if a]) >= 2, timeout=120000)
        shots.take("4-demo-smollm2", demo)
        demo.close()

        # 5. The report: the served model, weights in words, the chats with the model that gave them.
        report = run.export_report(tmp_path / "session.html")
        text = report.read_text()
        assert "<h2>Served model</h2>" in text and "checkpoint weights" in text and "Paris" in text
        browser = QTextBrowser()
        qtbot.addWidget(browser)
        browser.resize(1100, 900)
        browser.setHtml(text)
        browser.show()
        shots.take("5-report", browser)
        browser.close()
        box = run.confirm_report(report)
        shots.take("5-report-saved", box)
        box.close()

        # 6. Plan: Nemotron-3-Nano on a 24 GiB B60 overflows, and says the TP that fits.
        with qtbot.waitSignal(window.settled, timeout=30000):
            window.load(str(NANO))
        plan = window.tab("Plan")
        window.tabs.setCurrentWidget(plan)
        window.launch_state.update(target="sglang==0.5.23")
        plan.preset.setCurrentIndex(next(i for i in range(plan.preset.count()) if "B60" in plan.preset.itemText(i)))
        qtbot.waitUntil(lambda: plan.plan is not None and plan.plan.device_memory == 24 << 30, timeout=5000)
        assert plan.bar.overflow and plan.advice.tp == 4
        shots.take("6-plan-overflow-b60", window)
        window.tabs.setCurrentWidget(window.tab("Validate"))
        window.tab("Validate").validate()
        assert "PLAN_WEIGHTS_DO_NOT_FIT" in [f.code for f in window.tab("Validate").result.findings]
        shots.take("6-validate-same-device", window)

        # 8. Quit with a session asks; Cancel keeps the window.
        window.confirm_quit = True
        asked: list[str] = []

        def answer_cancel() -> None:
            box = window.quit_question
            asked.append(box.text())
            shots.take("8-quit-asks", box)
            box.cancel_button.click()

        QTimer.singleShot(300, answer_cancel)
        assert not window.close() and window.isVisible()
        assert "chat answer" in asked[0] and "running engine" in asked[0]
        window.confirm_quit = False
    finally:
        if run is not None:
            run.shutdown()
        window.confirm_quit = False
    assert not _children()
