"""The attach bar's API key: a password field and "Remember". The key lives in memory only;
"Remember" puts it in the system keyring for that URL (never in the settings file or a log), and
is offered only where the keyring package is installed."""

from __future__ import annotations

from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLineEdit, QWidget

from bringup.app import api_key_store


class ApiKeyField(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.edit = QLineEdit()
        self.edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.edit.setPlaceholderText("API key (optional)")
        self.edit.setToolTip("Sent as 'Authorization: Bearer KEY' to a server started with --api-key")
        self.remember = QCheckBox("Remember")
        if api_key_store.keyring_available():
            self.remember.setToolTip("Keep the key in the system keyring for this URL")
        else:
            self.remember.setEnabled(False)
            self.remember.setToolTip("Install the keyring package (pip install keyring) to remember keys; "
                                     "the key is never written to the settings file")
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.edit, 1)
        row.addWidget(self.remember)

    def key(self) -> str | None:
        return self.edit.text().strip() or None

    def setText(self, key: str) -> None:  # noqa: N802 (reads like QLineEdit)
        self.edit.setText(key)

    def keep_for(self, url: str) -> None:
        """After an attach: store the key for `url` if asked, forget it if not."""
        key = self.key()
        if self.remember.isChecked() and key:
            problem = api_key_store.remember(url, key)
            if problem:
                self.remember.setChecked(False)
                self.remember.setToolTip(f"Not remembered: {problem}")
        elif not self.remember.isChecked():
            api_key_store.forget(url)

    def recall_for(self, url: str) -> None:
        """Fill in the key remembered for `url`, if any (and the field is empty)."""
        if self.remember.isEnabled() and not self.edit.text():
            key = api_key_store.recall(url)
            if key:
                self.edit.setText(key)
                self.remember.setChecked(True)
