"""A findings list shared by the Validate and Diagnose tabs: one row per finding, details below.

A finding reaches the widget as a plain dict (the `--json` shape of DESIGN.md: code, severity,
message, fix, engine_message, layers, source, plus whatever else the producer adds), so the
rules and the diagnosis can both feed it; `as_dict` turns their dataclasses into that shape.
"""

from __future__ import annotations

import dataclasses
import html

from PySide6.QtCore import QRect, QSize, Qt, Signal
from PySide6.QtGui import QAction, QColor, QFont, QGuiApplication, QKeySequence, QPainter, QPen
from PySide6.QtWidgets import (
    QListWidget,
    QListWidgetItem,
    QSplitter,
    QStyle,
    QStyledItemDelegate,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

# Severity -> (colour, glyph, rank). Rank orders the list: the worst first.
SEVERITY = {
    "error": ("#D62828", "\u2715", 0),
    "failure": ("#D62828", "\u2715", 0),
    "warning": ("#C77700", "!", 1),
    "info": ("#2F6DB5", "i", 2),
    "ok": ("#2e9d5b", "\u2713", 3),
}
_UNKNOWN = ("#8a8f98", "?", 4)
FINDING_ROLE = Qt.ItemDataRole.UserRole + 1


def severity_style(severity: str | None) -> tuple[str, str, int]:
    return SEVERITY.get((severity or "").lower(), _UNKNOWN)


def as_dict(finding) -> dict:
    """A finding (dict, dataclass, or object with to_json) as the plain dict the widgets read."""
    if isinstance(finding, dict):
        return finding
    if hasattr(finding, "to_json"):
        return finding.to_json()
    if dataclasses.is_dataclass(finding):
        return dataclasses.asdict(finding)
    return dict(vars(finding))


def layers_text(layers) -> str:
    layers = list(layers or [])
    if not layers:
        return ""
    shown = ", ".join(str(i) for i in layers[:8])
    return f"layer {shown}" if len(layers) == 1 else f"layers {shown}{', ...' if len(layers) > 8 else ''}"


def chip_text(finding: dict) -> str:
    """The layers a finding names, short: "layer 0 not in 5, 12, 19, ..." for a layer-index finding."""
    requested = finding.get("requested_layer")
    valid = list(finding.get("valid_layers") or [])
    if isinstance(requested, int) and valid:
        shown = ", ".join(str(i) for i in valid[:8]) + (", ..." if len(valid) > 8 else "")
        return f"layer {requested} not in {shown}"
    return layers_text(finding.get("layers"))


def two_lines(fm, text: str, width: int) -> list[str]:
    """`text` wrapped at words into at most two lines of `width` pixels, the second elided."""
    words, first = text.split(), ""
    while words and fm.horizontalAdvance((first + " " + words[0]).strip()) <= width:
        first = (first + " " + words.pop(0)).strip()
    if not first and words:  # one word wider than the line
        return [fm.elidedText(text, Qt.TextElideMode.ElideRight, width)]
    rest = " ".join(words)
    return [first] + ([fm.elidedText(rest, Qt.TextElideMode.ElideRight, width)] if rest else [])


class _FindingDelegate(QStyledItemDelegate):
    """Paints a finding as a coloured severity badge, a bold title line and the message on two lines."""

    ROW_HEIGHT = 66

    def sizeHint(self, option, index) -> QSize:
        return QSize(0, self.ROW_HEIGHT)

    def paint(self, painter: QPainter, option, index) -> None:
        finding = index.data(FINDING_ROLE) or {}
        colour, glyph, _ = severity_style(finding.get("severity"))
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        rect = option.rect
        selected = bool(option.state & QStyle.StateFlag.State_Selected)
        hover = bool(option.state & QStyle.StateFlag.State_MouseOver)
        painter.fillRect(rect, option.palette.base().color())
        if selected or hover:
            tint = QColor(colour)
            tint.setAlpha(38 if selected else 16)
            painter.fillRect(rect, tint)
        if selected:
            painter.setPen(QPen(QColor(colour), 1))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRect(rect.adjusted(0, 0, -1, -1))
        painter.fillRect(QRect(rect.left(), rect.top(), 4, rect.height()), QColor(colour))
        # Badge.
        badge = QRect(rect.left() + 12, rect.top() + (rect.height() - 22) // 2, 22, 22)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor(colour))
        painter.drawEllipse(badge)
        font = QFont(option.font)
        font.setBold(True)
        painter.setFont(font)
        painter.setPen(QColor("white"))
        painter.drawText(badge, Qt.AlignmentFlag.AlignCenter, glyph)
        # Title: code and layers; second line: the message.
        text_colour = option.palette.text().color()
        left = badge.right() + 10
        width = rect.right() - left - 8
        line = painter.fontMetrics().height()
        title_rect = QRect(left, rect.top() + 5, width, line + 4)
        painter.setPen(text_colour)
        title = finding.get("title") or finding.get("code") or "finding"
        where = chip_text(finding)
        painter.drawText(title_rect, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, title)
        if where:
            title_width = painter.fontMetrics().horizontalAdvance(title)
            chip_font = QFont(option.font)
            chip_font.setPointSizeF(max(7.0, option.font.pointSizeF() * 0.85))
            painter.setFont(chip_font)
            chip_w = painter.fontMetrics().horizontalAdvance(where) + 12
            chip = QRect(left + title_width + 10, title_rect.top() + 2, chip_w, title_rect.height() - 4)
            if chip.right() < rect.right() - 8:
                painter.setPen(QPen(QColor(colour), 1))
                painter.setBrush(Qt.BrushStyle.NoBrush)
                painter.drawRoundedRect(chip, 6, 6)
                painter.setPen(QColor(colour))
                painter.drawText(chip, Qt.AlignmentFlag.AlignCenter, where)
        painter.setFont(option.font)
        message_colour = QColor(text_colour)
        message_colour.setAlpha(200)
        painter.setPen(message_colour)
        message = " ".join(str(finding.get("message") or finding.get("explanation") or "").split())
        for i, text in enumerate(two_lines(painter.fontMetrics(), message, width)):
            line_rect = QRect(left, title_rect.bottom() + 2 + i * line, width, line)
            painter.drawText(line_rect, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, text)
        painter.restore()


class _FindingListView(QListWidget):
    """A list that says something useful when it is empty."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.empty_text = "No findings."
        self.empty_ok = True

    def paintEvent(self, event) -> None:
        super().paintEvent(event)
        if self.count():
            return
        painter = QPainter(self.viewport())
        colour = QColor(SEVERITY["ok"][0] if self.empty_ok else "#8a8f98")
        painter.setPen(colour)
        font = QFont(self.font())
        font.setPointSizeF(font.pointSizeF() * 1.1)
        painter.setFont(font)
        prefix = "\u2713  " if self.empty_ok else ""
        painter.drawText(
            self.viewport().rect().adjusted(12, 12, -12, -12),
            Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap,
            prefix + self.empty_text,
        )


def finding_text(finding: dict) -> str:
    """A finding as plain text: severity and code, what and why, the fix, the engine's words, the source."""
    lines = [f"[{(finding.get('severity') or '').upper()}] {finding.get('code', '')}"
             + (f": {finding['title']}" if finding.get("title") else "")]
    for key in ("message", "explanation"):
        if finding.get(key) and finding.get(key) not in lines:
            lines.append(str(finding[key]))
    if finding.get("fix"):
        lines.append(f"Fix: {finding['fix']}")
    if finding.get("engine_message") or finding.get("matched"):
        lines.append(f"Engine: {finding.get('engine_message') or finding.get('matched')}")
    if finding.get("layers"):
        lines.append(f"Layers: {', '.join(map(str, finding['layers']))}")
    if finding.get("source"):
        lines.append(f"Source: {finding['source']}")
    return "\n".join(lines)


def finding_html(finding: dict, extra_rows: list[tuple[str, str]] = ()) -> str:
    """The details pane: what happened and why, what to do, the engine's own words, the source."""
    colour, glyph, _ = severity_style(finding.get("severity"))
    esc = lambda s: html.escape(str(s))  # noqa: E731
    title = finding.get("title")
    parts = [
        f"<p style='margin:0 0 6px 0'><span style='color:{colour};font-weight:bold'>"
        f"{esc((finding.get('severity') or '').upper())}</span>&nbsp;&nbsp;<b>{esc(title or finding.get('code') or '')}</b>"
        + (f"&nbsp;&nbsp;<span style='color:#8a8f98'>{esc(finding.get('code') or '')}</span>" if title else "")
        + "</p>",
    ]
    for text in dict.fromkeys(t for t in (finding.get("message"), finding.get("explanation")) if t):
        parts.append(f"<p style='margin:0 0 8px 0'>{esc(text)}</p>")
    if finding.get("fix"):
        parts.append(
            "<table width='100%' cellpadding='6' style='background:#eaf5ee;margin:0 0 8px 0'><tr><td>"
            f"<b style='color:#2e7d4f'>Fix</b>&nbsp; {esc(finding['fix'])}</td></tr></table>"
        )
    engine_message = finding.get("engine_message") or finding.get("matched")
    if engine_message:
        lines = finding.get("lines") or []
        where = f" (log line {', '.join(str(n) for n in lines[:5])})" if lines else ""
        whose = {"sglang": "SGLang's", "bringup": "our engine's", "torch": "torch's", "transformers": "transformers'",
                 "triton": "Triton's"}.get(finding.get("engine") or "", "the engine's")
        parts.append(
            f"<p style='margin:0 0 2px 0;color:#666'>In {whose} own words{where}</p>"
            "<pre style='background:#f4f4f6;padding:6px;margin:0 0 8px 0;white-space:pre-wrap'>"
            f"{esc(engine_message)}</pre>"
        )
    rows = list(extra_rows)
    if finding.get("stage"):
        rows.append(("Fails at", str(finding["stage"])))
    if finding.get("layers") and finding.get("requested_layer") is None:  # else the tab's rows say it
        rows.append(("Layers", ", ".join(str(i) for i in finding["layers"])))
    if finding.get("source"):
        rows.append(("Source", str(finding["source"])))
    if rows:
        cells = "".join(
            f"<tr><td style='color:#666;padding-right:10px'>{esc(k)}</td><td>{esc(v)}</td></tr>" for k, v in rows
        )
        parts.append(f"<table>{cells}</table>")
    return "".join(parts)


class FindingsList(QWidget):
    """Findings sorted worst first, with the selected one's details underneath.

    `finding_selected` emits the finding dict (or None when the selection clears); `details_for`
    lets a tab add rows to the details pane (e.g. the requested layer's mixer).
    """

    finding_selected = Signal(object)

    def __init__(self, empty_text: str = "No findings.", parent=None) -> None:
        super().__init__(parent)
        self.details_for = lambda finding: []
        self.fit_rows = 0  # > 0: the list takes the height of up to this many rows, details the rest
        self.list = _FindingListView()
        self.list.empty_text = empty_text
        self.list.setItemDelegate(_FindingDelegate(self.list))
        self.list.setMouseTracking(True)
        self.list.setAlternatingRowColors(False)
        self.list.setSpacing(1)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.details = QTextBrowser()
        self.details.setOpenExternalLinks(True)
        self.details.setPlaceholderText("Select a finding to see why it happens and what to change.")
        self.splitter = splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(self.list)
        splitter.addWidget(self.details)
        self.set_proportions(3, 2)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(splitter)
        self.list.currentItemChanged.connect(self._on_current)
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.ActionsContextMenu)
        copy = QAction("Copy finding", self.list)
        copy.setShortcut(QKeySequence.StandardKey.Copy)
        copy.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        copy.triggered.connect(self.copy_current)
        self.list.addAction(copy)

    def set_proportions(self, list_part: int, details_part: int) -> None:
        """How the height is shared between the list and the details pane."""
        self.splitter.setStretchFactor(0, list_part)
        self.splitter.setStretchFactor(1, details_part)

    def set_empty_text(self, text: str, ok: bool = True) -> None:
        self.list.empty_text = text
        self.list.empty_ok = ok
        self.list.viewport().update()

    def set_findings(self, findings) -> None:
        """Show these findings; keep the same finding selected if it is still there."""
        current = self.current_finding()
        key = (current or {}).get("code"), tuple((current or {}).get("layers") or ())
        items = sorted((as_dict(f) for f in findings), key=lambda f: severity_style(f.get("severity"))[2])
        self.list.blockSignals(True)
        self.list.clear()
        keep = None
        for finding in items:
            item = QListWidgetItem()
            item.setData(FINDING_ROLE, finding)
            item.setToolTip(f"{finding.get('code', '')}: {finding.get('message') or finding.get('explanation') or ''}")
            self.list.addItem(item)
            if current and (finding.get("code"), tuple(finding.get("layers") or ())) == key:
                keep = item
        self.list.blockSignals(False)
        self._fit_list()
        if keep is not None:
            self.list.setCurrentItem(keep)
            self._show(keep.data(FINDING_ROLE))
        else:
            self.details.clear()
            if current is not None:
                self.finding_selected.emit(None)

    def _fit_list(self) -> None:
        if not self.fit_rows:
            return
        total = sum(self.splitter.sizes())
        if total <= 0:
            return
        rows = min(max(self.list.count(), 2), self.fit_rows)
        want = rows * (_FindingDelegate.ROW_HEIGHT + 2) + 2 * self.list.frameWidth() + 4
        self.splitter.setSizes([want, max(80, total - want)])

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._fit_list()

    def copy_current(self) -> None:
        """The selected finding as plain text on the clipboard (for a bug report or a chat)."""
        finding = self.current_finding()
        if finding is not None:
            QGuiApplication.clipboard().setText(finding_text(finding))

    def findings(self) -> list[dict]:
        return [self.list.item(i).data(FINDING_ROLE) for i in range(self.list.count())]

    def current_finding(self) -> dict | None:
        item = self.list.currentItem()
        return item.data(FINDING_ROLE) if item is not None else None

    def select(self, row: int) -> None:
        self.list.setCurrentRow(row)

    def _on_current(self, item, _previous) -> None:
        finding = item.data(FINDING_ROLE) if item is not None else None
        if finding is None:
            self.details.clear()
        else:
            self._show(finding)
        self.finding_selected.emit(finding)

    def _show(self, finding: dict) -> None:
        self.details.setHtml(finding_html(finding, self.details_for(finding)))


def layer_rows(finding: dict, layer_map=None) -> list[tuple[str, str]]:
    """Details-pane rows for a layer-index finding: the layer asked for, what it is, the valid ones."""
    requested = finding.get("requested_layer")
    if requested is None:
        return []

    def layer(index):
        if layer_map is None or not 0 <= index < layer_map.num_layers:
            return None
        return layer_map.layers[index]

    rows = [("Requested layer", str(requested))]
    info = finding.get("requested") or (vars(layer(requested)) if layer(requested) is not None else None)
    if info:
        rows.append(("It is", f"{info['mixer']} (ffn {info['ffn']})"))
    valid = finding.get("valid_layers") or []
    if valid:
        kinds = sorted({v["mixer"] for v in finding.get("valid") or []}) or sorted(
            {layer(i).mixer for i in valid if layer(i) is not None})
        rows.append(("Valid layers", ", ".join(map(str, valid)) + (f"  ({', '.join(kinds)})" if kinds else "")))
    return rows
