"""The Run tab's "Dump layers" option for an SGLang launch: a checkbox and the folder SGLang writes
its per-layer tensor dumps into (--debug-tensor-dump-output-folder; the flag itself is built by
core/launch/sglang.py, for the releases that have it). Validate's Numerics page compares the folder
with the reference ("Compare dump")."""

from __future__ import annotations

import os
import tempfile

from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLineEdit, QWidget


def default_folder() -> str:
    return os.path.join(tempfile.gettempdir(), "bringup-sglang-dump")


class TensorDumpOption(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.enabled = QCheckBox("Dump layers")
        self.enabled.setToolTip(
            "Start SGLang with --debug-tensor-dump-output-folder: every forward pass writes each layer's outputs "
            "(one file per pass and rank; large for a big model, so send few requests). SGLang turns CUDA graphs "
            "and its warm-up off meanwhile. Validate > Numerics > 'Compare dump' compares the folder with the "
            "reference; --disable-radix-cache keeps every prompt a full prefill.")
        self.folder = QLineEdit(default_folder())
        self.folder.setToolTip("Where SGLang writes TP*_PP*_Rank*_pid*/Pass*.pt")
        self.folder.setEnabled(False)
        self.enabled.toggled.connect(self.folder.setEnabled)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.enabled)
        row.addWidget(self.folder, 1)

    def chosen_folder(self) -> str | None:
        """The folder to dump into, or None when the option is off."""
        if not self.enabled.isChecked():
            return None
        return self.folder.text().strip() or default_folder()
