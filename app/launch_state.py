"""The launch settings the Validate, Plan and Run tabs share: one model, several views.

After napari's model/view split: this object holds the values and says when they change; the tabs'
forms only show and edit it. So the device chosen in Validate is the device Plan plans for, and
the launch Validate approved (its `ValidationResult`) is the one Run starts. Values use the
settings vocabulary of `bringup.core.rules.settings` (`LaunchSettings`' fields), plus the target
and one device's memory in bytes (None: no memory plan asked for).
"""

from __future__ import annotations

from dataclasses import fields

from PySide6.QtCore import QObject, Signal

from bringup.core.rules.settings import LaunchSettings


def default_target() -> str:
    """The newest SGLang rule profile: what a bring-up usually checks first."""
    from bringup.core.rules.targets import known_targets

    return [t for t in known_targets() if t.startswith("sglang")][-1]


SETTING_KEYS = tuple(f.name for f in fields(LaunchSettings))
KEYS = ("target", *SETTING_KEYS, "device_memory")


class LaunchState(QObject):
    """The shared launch settings and the last validation of them."""

    changed = Signal(dict)  # {key: new value} of the keys that really changed
    validated = Signal(object)  # the ValidationResult of the current values, or None (nothing valid)

    def __init__(self, parent: QObject | None = None, **values) -> None:
        super().__init__(parent)
        defaults = LaunchSettings(device="xpu").to_json()  # an XPU bring-up is the workbench's first case
        self._values: dict = {"target": default_target(), **defaults, "device_memory": None}
        self.result = None  # ValidationResult of the values as they are now
        self.update(**values)

    def __getitem__(self, key: str):
        return self._values[key]

    def values(self) -> dict:
        return dict(self._values)

    def update(self, **changes) -> dict:
        """Set values; emits `changed` once with the ones that differ (none: no signal). A change
        makes the last validation stale until the next `set_result`."""
        unknown = [k for k in changes if k not in KEYS]
        if unknown:
            raise KeyError(f"unknown launch setting {unknown[0]!r}; the settings are: {', '.join(KEYS)}")
        diff = {k: v for k, v in changes.items() if self._values.get(k) != v}
        if not diff:
            return {}
        self._values.update(diff)
        if self.result is not None:
            self.result = None
            self.validated.emit(None)
        self.changed.emit(diff)
        return diff

    @property
    def target(self) -> str:
        return self._values["target"]

    def launch_settings(self) -> LaunchSettings:
        return LaunchSettings(**{k: self._values[k] for k in SETTING_KEYS})

    # --- what Validate approved --------------------------------------------------------------
    def set_result(self, result) -> None:
        """The validation of the current values (Validate calls this after each run)."""
        self.result = result
        self.validated.emit(result)

    @property
    def launch(self):
        """The Launch the last validation approved (Run starts it), or None before one."""
        return self.result.launch if self.result is not None else None
