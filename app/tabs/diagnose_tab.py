"""The Diagnose tab: paste, open or drop a crash log; findings with the why and the fix.

Clicking a layer-index finding marks the requested layer red on the layer map and outlines the
layers that were valid (`Highlight(requested=[0], related=[5, 12, ...], message=...)`).
A log file dropped anywhere on the window lands here: the tab watches its window's drops.
"""

from __future__ import annotations

import html
import sys
import traceback
from pathlib import Path

from PySide6.QtCore import QEvent, QObject, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QGuiApplication, QKeySequence, QShortcut, QTextCursor, QTextFormat
from PySide6.QtWidgets import (
                               QFileDialog,
                               QGroupBox,
                               QHBoxLayout,
                               QLabel,
                               QPlainTextEdit,
                               QPushButton,
                               QSplitter,
                               QTabWidget,
                               QTextEdit,
                               QVBoxLayout,
                               QWidget,
                               )

from bringup.app.diagnose.reading_panel import ReadingPanel
from bringup.app.layermap.highlight import Highlight
from bringup.core.diagnosis.reader import NotText, read_path
from bringup.core.layermap.sizes import format_bytes

from .background import Background
from .findings_widgets import FindingsList, as_dict, layer_rows
from .validate_widgets import mono_font

# Logs can be huge; the failure is at the end. Read at most this much of a file (its tail).
MAX_LOG_BYTES = 4 * 1024 * 1024
INLINE_CHARS = 256 * 1024  # diagnose a log this small on the GUI thread, a bigger one on a thread


def read_log(path: str | Path) -> str:
    """The text of a log file: within the reader's cap (head and tail kept), decoded by its BOM."""
    return read_path(path, cap=MAX_LOG_BYTES).text


def _dropped_file(event) -> str | None:
    mime = event.mimeData()
    if not mime.hasUrls():
        return None
    for url in mime.urls():
        if url.isLocalFile() and Path(url.toLocalFile()).is_file():
            return url.toLocalFile()
    return None


class _WindowDrops(QObject):
    """Event filter on the top-level window: a file dropped anywhere opens in the Diagnose tab."""

    def __init__(self, tab: "DiagnoseTab") -> None:
        super().__init__(tab)
        self.tab = tab

    @staticmethod
    def _log(event) -> str | None:
        """A dropped file that is a log; a config.json means a model (the layer map takes those)."""
        path = _dropped_file(event)
        return path if path and not path.lower().endswith(".json") else None

    def eventFilter(self, obj, event) -> bool:
        kind = event.type()
        if kind in (QEvent.Type.DragEnter, QEvent.Type.DragMove) and self._log(event):
            event.acceptProposedAction()
            return True
        if kind == QEvent.Type.Drop:
            path = self._log(event)
            if path:
                event.acceptProposedAction()
                self.tab.open_file(path)
                self.tab.bring_forward()
                return True
        return False


class DiagnoseTab(QWidget):
    title = "Diagnose"
    highlight_requested = Signal(object)
    diagnosed = Signal(object)  # the Diagnosis shown

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.layer_map = None
        self.diagnosis = None  # the last bringup.core.diagnosis.Diagnosis
        self.source_name = ""
        self._note = ""  # what the reader skipped of the last file
        self.map_image = None  # a callable giving the layer map as a QImage (the window sets it)
        self._generation = 0  # bumped per diagnosis; a late thread result for older text is dropped
        self._background = Background(self)
        self._background.done.connect(self._diagnosed)
        self.setAcceptDrops(True)
        self._window_filter = None
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(250)
        self._timer.timeout.connect(self.diagnose)
        self._build()

    def _build(self) -> None:
        self.log = QPlainTextEdit()
        self.log.setFont(mono_font())
        self.log.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.log.setPlaceholderText(
            "Paste an engine log or a traceback here, open a log file, or drop one anywhere on the window.\n\n"
            "For example a launch that failed with\n"
            "  ValueError: layer_id=0 not in full attention layers: dict_keys([5, 12, 19, 26, 33, 42])"
        )
        self.log.textChanged.connect(self._timer.start)
        open_button = QPushButton("Open log\u2026")
        open_button.setToolTip("Open a log file (Ctrl+O); or drop one anywhere on the window")
        open_button.clicked.connect(self._choose_file)
        shortcut = QShortcut(QKeySequence.StandardKey.Open, self, self._choose_file)
        shortcut.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        paste_button = QPushButton("Paste")
        paste_button.setToolTip("Replace the log with the clipboard's text")
        paste_button.clicked.connect(self.paste)
        clear_button = QPushButton("Clear")
        clear_button.clicked.connect(self.clear)
        self.copy_report_button = QPushButton("Copy as issue report")
        self.copy_report_button.setToolTip("Copy the diagnosis as markdown (facts, failure, layers, findings) with the "
                                           "layer map's image")
        self.copy_report_button.clicked.connect(self.copy_issue_report)
        self.copy_report_button.setEnabled(False)
        self.log_label = QLabel("Log")
        self.log_label.setStyleSheet("color: #6b7280;")
        tools = QHBoxLayout()
        tools.addWidget(self.log_label, 1)
        tools.addWidget(paste_button)
        tools.addWidget(open_button)
        tools.addWidget(clear_button)
        tools.addWidget(self.copy_report_button)
        log_box = QGroupBox("Engine log or traceback")
        log_layout = QVBoxLayout(log_box)
        log_layout.addLayout(tools)
        log_layout.addWidget(self.log)

        self.summary = QLabel("")
        self.summary.setWordWrap(True)
        self.summary.setTextFormat(Qt.TextFormat.RichText)
        self.findings = FindingsList("Nothing to explain yet. Paste or drop a log.")
        self.findings.details_for = lambda finding: layer_rows(finding, self.layer_map)
        self.findings.fit_rows = 4  # few findings, long explanations: the details get the rest
        self.findings.finding_selected.connect(self._selected)
        findings_box = QGroupBox("Findings")
        findings_layout = QVBoxLayout(findings_box)
        findings_layout.addWidget(self.summary)
        self.reading = ReadingPanel()
        findings_layout.addWidget(self.reading)
        findings_layout.addWidget(self.findings)

        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(log_box)
        splitter.addWidget(findings_box)
        splitter.setStretchFactor(0, 2)
        splitter.setStretchFactor(1, 3)
        splitter.setSizes([560, 840])
        layout = QVBoxLayout(self)
        layout.addWidget(splitter)

    # --- the tab contract ---------------------------------------------------------------------
    def set_layer_map(self, layer_map) -> None:
        self.layer_map = layer_map
        if self.log.toPlainText().strip():
            self.diagnose()

    # --- input --------------------------------------------------------------------------------
    def set_text(self, text: str, name: str = "", keep_note: bool = False) -> None:
        if not keep_note:
            self._note = ""
        self.source_name = name
        self.log.setPlainText(text)
        self.log_label.setText(name or "Log")
        self.diagnose()

    def open_file(self, path: str) -> None:
        """Show and diagnose a log file (its last MAX_LOG_BYTES when it is bigger)."""
        try:
            log = read_path(path, cap=MAX_LOG_BYTES)
        except NotText as exc:
            self.summary.setText(f"<span style='color:#D62828'>{html.escape(str(exc))}</span>")
            return
        except OSError as exc:
            why = html.escape(f"Cannot read {path}: {exc.strerror or exc}")
            self.summary.setText(f"<span style='color:#D62828'>{why}</span>")
            return
        name = Path(path).name
        self._note = log.note
        self.set_text(log.text, f"{name} (head and tail, {format_bytes(MAX_LOG_BYTES, short=True)})" if log.skipped
                      else name, keep_note=True)

    def clear(self) -> None:
        self.set_text("")

    def paste(self) -> None:
        self.set_text(QGuiApplication.clipboard().text(), "pasted text")

    def _choose_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open an engine log", "", "Logs (*.log *.txt *.out *.err);;All files (*)")
        if path:
            self.open_file(path)

    def dragEnterEvent(self, event) -> None:
        if _dropped_file(event):
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:
        path = _dropped_file(event)
        if path:
            event.acceptProposedAction()
            self.open_file(path)

    def showEvent(self, event) -> None:
        super().showEvent(event)
        self.watch_window_drops()

    def watch_window_drops(self) -> None:
        """Accept file drops on the whole window, not only on this tab."""
        window = self.window()
        if window is self or self._window_filter is not None:
            return
        self._window_filter = _WindowDrops(self)
        window.setAcceptDrops(True)
        window.installEventFilter(self._window_filter)

    def bring_forward(self) -> None:
        """Make the page holding this tab current in every tab widget above it."""
        widget = self.parentWidget()
        while widget is not None:
            if isinstance(widget, QTabWidget):
                for i in range(widget.count()):
                    page = widget.widget(i)
                    if page is self or page.isAncestorOf(self):
                        widget.setCurrentIndex(i)
            widget = widget.parentWidget()

    # --- diagnosis ----------------------------------------------------------------------------
    def diagnose(self) -> None:
        """Diagnose the log now: inline when it is small, on a thread when it is big (a 4 MB log
        takes about half a second to parse; the window must not stall for it)."""
        self._timer.stop()
        self._generation += 1
        text = self.log.toPlainText()
        if not text.strip():
            self.diagnosis = None
            self.reading.show_reading(None)
            self.copy_report_button.setEnabled(False)
            self.findings.set_findings([])
            self.findings.set_empty_text("Nothing to explain yet. Paste or drop a log.", ok=False)
            self.summary.setText("")
            self.highlight_requested.emit(None)
            return
        from bringup.core.diagnosis import diagnose

        note = self._note
        if len(text) <= INLINE_CHARS:
            self._show_diagnosis(_diagnose_or_bug(diagnose, text, self.layer_map, note))
            return
        self.summary.setText(f"Reading {len(text):,} characters\u2026")
        layer_map = self.layer_map
        self._background.run(lambda: _diagnose_or_bug(diagnose, text, layer_map, note), token=self._generation)

    def _diagnosed(self, generation, result) -> None:
        if generation == self._generation:  # not a stale run for text that has changed since
            self._show_diagnosis(result)

    def _show_diagnosis(self, diagnosis) -> None:
        if isinstance(diagnosis, str):  # the parser failed: say so in the tab
            self.diagnosis = None
            self.findings.set_findings([])
            self.findings.set_empty_text(diagnosis, ok=False)
            self.summary.setText(f"<span style='color:#D62828'>{html.escape(diagnosis)}</span>")
            return
        self.diagnosis = diagnosis
        self.reading.show_reading(diagnosis.reading, _excerpt(diagnosis.reading))
        self.copy_report_button.setEnabled(True)
        findings = [as_dict(f) for f in diagnosis.findings]
        self.findings.set_empty_text(
            "No known failure in this log. If it did fail, the cause is not in the catalogue yet.", ok=False
        )
        self.findings.set_findings(findings)
        self.summary.setText(_summary(findings, self.source_name, diagnosis))
        if findings and self.findings.current_finding() is None:
            self.findings.select(0)
        self.diagnosed.emit(diagnosis)

    def issue_report(self, image_path: str = "") -> str:
        """The diagnosis as markdown (what "Copy as issue report" puts on the clipboard)."""
        from bringup.core.diagnosis.issue_report import issue_markdown

        if self.diagnosis is None:
            return ""
        return issue_markdown(self.diagnosis, self.source_name, image_path)

    def _window_map_image(self):
        """The window's layer map as drawn now (marks included), when the tab sits in a window with one."""
        from bringup.app.layermap.view import LayerMapView

        window = self.window()
        view = window.findChild(LayerMapView) if window is not self else None
        return view.grab().toImage() if view is not None and view.isVisible() else None

    def copy_issue_report(self) -> str:
        """Markdown and the map's image on the clipboard; the image is also saved beside the session cache
        so the markdown can link it."""
        from PySide6.QtCore import QMimeData

        image = self.map_image() if callable(self.map_image) else self._window_map_image()
        image_path = ""
        if image is not None and not image.isNull():
            folder = Path.home() / ".cache" / "bringup" / "reports"
            folder.mkdir(parents=True, exist_ok=True)
            image_path = str(folder / "diagnose-layer-map.png")
            image.save(image_path)
        text = self.issue_report(image_path)
        mime = QMimeData()
        mime.setText(text)
        if image is not None and not image.isNull():
            mime.setImageData(image)
        QGuiApplication.clipboard().setMimeData(mime)
        self.summary.setText(self.summary.text() + "<br><span style='color:#2A9D8F'>Copied as an issue report"
                             + (" with the layer map's image" if image_path else "") + ".</span>")
        return text

    def _selected(self, finding) -> None:
        self.highlight_requested.emit(Highlight.of(finding))
        self._mark_lines((finding or {}).get("lines") or [])

    def _mark_lines(self, lines: list[int]) -> None:
        """Tint the log lines a finding was read from and scroll to the first."""
        marks = []
        doc = self.log.document()
        for number in lines:
            block = doc.findBlockByNumber(number - 1)
            if not block.isValid():
                continue
            mark = QTextEdit.ExtraSelection()
            mark.format.setBackground(QColor(214, 40, 40, 40))
            mark.format.setProperty(QTextFormat.Property.FullWidthSelection, True)
            mark.cursor = QTextCursor(block)
            marks.append(mark)
        self.log.setExtraSelections(marks)
        if marks:
            self.log.setTextCursor(marks[0].cursor)
            self.log.centerCursor()


def _diagnose_or_bug(diagnose, text: str, layer_map, note: str = ""):
    """The Diagnosis, or a sentence saying the parser failed (a bug must not take the tab down)."""
    try:
        return diagnose(text, layer_map, skipped_note=note)
    except Exception as exc:  # noqa: BLE001
        traceback.print_exc(file=sys.stderr)
        return (f"The log parser failed: {type(exc).__name__}: {exc}. This is a bug in the workbench; please "
                "report it with the log.")


def _excerpt(reading):
    """The engine's source around the failure's innermost engine frame, where a copy is at hand."""
    if reading is None or reading.engine_frame is None:
        return None
    from bringup.core.diagnosis.engine_source import frame_source

    return frame_source(reading.engine_frame, reading.run.get("version"))


# Facts read from the log worth a glance, in this order, with their labels.
_FACTS = (("device", "device"), ("attention_backend", "attention"), ("mamba_radix_cache_strategy", "strategy"),
          ("tp_size", "TP"), ("pp_size", "PP"), ("page_size", "page"), ("kv_tokens", "KV tokens"),
          ("mamba_cache_size", "state slots"), ("weights_gb", "weights GB"), ("sglang_version", "sglang"))


def _summary(findings: list[dict], name: str, diagnosis=None) -> str:
    where = f" in {html.escape(name)}" if name else ""
    errors = sum(1 for f in findings if f.get("severity") == "error")
    if not findings:
        text = f"No known failure{where}."
    else:
        text = f"<b>{len(findings)} finding{'s' if len(findings) != 1 else ''}</b>{where}"
        text += f", {errors} error{'s' if errors != 1 else ''}." if errors else "."
    if diagnosis is not None:
        facts = diagnosis.facts or {}
        shown = [f"{label} {facts[key]:,}" if isinstance(facts[key], int) and not isinstance(facts[key], bool)
                 else f"{label} {facts[key]}" for key, label in _FACTS if key in facts]
        read = f"{diagnosis.lines_read:,} lines read"
        dot = " \u00b7 "
        text += f"<br><span style='color:#6b7280'>{dot.join([read, *shown])}</span>"
        if diagnosis.note:
            text += f"<br><span style='color:#B45309'>{html.escape(diagnosis.note)}</span>"
    return text
