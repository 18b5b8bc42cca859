"""Binds form widgets to keys of a `LaunchState`, both ways: an edit sets the state's value, a
state change (from another tab) shows in the widget. Only the edited key is written, so a tab
that shows a value it was never given (Plan's device memory before the user picks one) does not
hand it to the others.
"""

from __future__ import annotations

from typing import Callable

from PySide6.QtWidgets import QCheckBox, QComboBox, QSpinBox, QWidget

from bringup.app.launch_state import LaunchState

AUTO = ("", "auto")


def combo_text(none_is_auto: bool = False) -> tuple[Callable, Callable]:
    """(read, show) for a combo box holding the value's text; None shows as "auto" when it may."""
    def read(combo: QComboBox):
        text = combo.currentText().strip()
        return None if none_is_auto and text in AUTO else text

    def show(combo: QComboBox, value) -> None:
        text = "auto" if value is None else str(value)
        if combo.findText(text) < 0:
            if not combo.isEditable():
                return  # a value this form cannot show: it keeps its own, the state keeps the value
            combo.addItem(text)
        combo.setCurrentText(text)

    return read, show


def spin_value(zero_is_none: bool = False) -> tuple[Callable, Callable]:
    def read(spin: QSpinBox):
        return (spin.value() or None) if zero_is_none else spin.value()

    def show(spin: QSpinBox, value) -> None:
        spin.setValue(int(value or 0))

    return read, show


def check_state() -> tuple[Callable, Callable]:
    return (lambda box: box.isChecked()), (lambda box, value: box.setChecked(bool(value)))


def _edited_signal(widget: QWidget):
    if isinstance(widget, QComboBox):
        return widget.currentTextChanged
    if isinstance(widget, QSpinBox):
        return widget.valueChanged
    if isinstance(widget, QCheckBox):
        return widget.toggled
    raise TypeError(f"no edit signal known for {type(widget).__name__}")


class FormBinding:
    """The widgets of one form, each bound to one state key."""

    def __init__(self, state: LaunchState, on_shown: Callable[[dict], None]) -> None:
        self._fields: dict[str, tuple[QWidget, Callable, Callable]] = {}
        self._showing = False
        self._on_shown = on_shown  # the form's reaction to values it was shown (grey out, re-validate)
        self.state = state
        state.changed.connect(self._show)

    def bind(self, key: str, widget: QWidget, read_show: tuple[Callable, Callable] | None = None) -> None:
        if read_show is None:
            read_show = (combo_text() if isinstance(widget, QComboBox) else
                         spin_value() if isinstance(widget, QSpinBox) else check_state())
        read, _show = read_show
        self._fields[key] = (widget, read, _show)
        _edited_signal(widget).connect(lambda *_: self.write(key))

    def write(self, key: str) -> None:
        """Hand the widget's value to the state (others then see it)."""
        if self._showing:
            return
        widget, read, _ = self._fields[key]
        self.state.update(**{key: read(widget)})

    def set_state(self, state: LaunchState) -> None:
        """Follow another state (the window's shared one): the form shows its values."""
        if state is self.state:
            return
        self.state.changed.disconnect(self._show)
        self.state = state
        state.changed.connect(self._show)
        self._show(state.values())

    def _show(self, changes: dict) -> None:
        self._showing = True
        try:
            for key, value in changes.items():
                if key in self._fields:
                    widget, _, show = self._fields[key]
                    widget.blockSignals(True)
                    try:
                        show(widget, value)
                    finally:
                        widget.blockSignals(False)
        finally:
            self._showing = False
        self._on_shown(changes)
