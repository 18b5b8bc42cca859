"""What the window remembers between runs (QSettings, an INI file): size, position, splitters, the
last tab, the attach URL and the recent models. Never an API key: that goes to the system keyring,
and only when the user asks (app/api_key_store.py).

`BRINGUP_SETTINGS=/path/file.ini` points it elsewhere (the tests use a temporary file)."""

from __future__ import annotations

import os

from PySide6.QtCore import QSettings

RECENT_MAX = 8


def app_settings() -> QSettings:
    path = os.environ.get("BRINGUP_SETTINGS")
    if path:
        return QSettings(path, QSettings.Format.IniFormat)
    return QSettings(QSettings.Format.IniFormat, QSettings.Scope.UserScope, "bringup", "workbench")


def recent_models(settings: QSettings | None = None) -> list[str]:
    s = settings or app_settings()
    value = s.value("recent/models", [])
    if isinstance(value, str):  # QSettings gives a lone string for a one-item list
        value = [value]
    return [str(v) for v in (value or []) if str(v).strip()][:RECENT_MAX]


def add_recent_model(source: str, settings: QSettings | None = None) -> list[str]:
    """Put `source` first (once); keep the newest RECENT_MAX."""
    s = settings or app_settings()
    items = [source] + [r for r in recent_models(s) if r != source]
    s.setValue("recent/models", items[:RECENT_MAX])
    s.sync()
    return items[:RECENT_MAX]


def clear_recent_models(settings: QSettings | None = None) -> None:
    s = settings or app_settings()
    s.remove("recent/models")
    s.sync()
