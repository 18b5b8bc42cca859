"""The chat's Send button sends the typed prompt (clicked() passes checked=False, which must not become the text)."""

from PySide6.QtCore import Qt

from bringup.app.run.chat_panel import ChatPanel
from bringup.core.client.engine_process import free_port


def test_send_button_sends_the_typed_prompt(qtbot):
    panel = ChatPanel()
    qtbot.addWidget(panel)
    assert "Start or attach" in panel.figures.text()
    panel.set_server(f"http://127.0.0.1:{free_port()}")  # nothing listens there: the request fails quickly
    assert "Ready" in panel.figures.text()
    panel.prompt.setPlainText("Hello there")
    qtbot.mouseClick(panel.send_button, Qt.MouseButton.LeftButton)
    assert panel.messages and panel.messages[0] == {"role": "user", "content": "Hello there"}
    assert panel.prompt.toPlainText() == ""
    qtbot.waitUntil(lambda: len(panel.samples) == 1, timeout=20000)
    assert panel.figures.text().startswith("error:")  # the refused connection is shown, not swallowed
