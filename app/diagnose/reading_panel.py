"""What the general reader found, shown above the findings: the failing line, the class with its
reasoning and confidence, the start-up stages as a timeline with the one it died in, the layers it
names in the map's words, and the engine frame with its source where that is at hand."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPlainTextEdit, QVBoxLayout, QWidget

from bringup.core.diagnosis.reading import STAGES, stage_label

RED, GREEN, GREY = "#D62828", "#2A9D8F", "#9CA3AF"


class StageTimeline(QWidget):
    """One chip per start-up stage: reached ones green, the one it died in red, later ones grey."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(4)
        self.chips: dict[str, QLabel] = {}
        for stage in STAGES:
            chip = QLabel(stage_label(stage))
            chip.setAlignment(Qt.AlignmentFlag.AlignCenter)
            chip.setMaximumHeight(26)
            row.addWidget(chip, 1)
            self.chips[stage] = chip
        self.set_stages([], None)

    def set_stages(self, reached: list[str], died: str | None) -> None:
        self.state = {}
        for stage, chip in self.chips.items():
            if stage == died:
                colour, state = RED, "died"
            elif stage in reached or (died in STAGES and STAGES.index(stage) < STAGES.index(died)):
                colour, state = GREEN, "reached"
            else:
                colour, state = GREY, "not reached"
            self.state[stage] = state
            chip.setStyleSheet(f"border: 1px solid {colour}; border-radius: 3px; padding: 2px; color: {colour};")
            chip.setToolTip(f"{stage_label(stage)}: {state}")


class ReadingPanel(QWidget):
    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.headline = QLabel("")
        self.headline.setWordWrap(True)
        self.headline.setTextFormat(Qt.TextFormat.RichText)
        self.headline.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.timeline = StageTimeline()
        self.layers = QLabel("")
        self.layers.setWordWrap(True)
        self.source = QPlainTextEdit()
        self.source.setReadOnly(True)
        self.source.setMaximumHeight(110)
        self.source.hide()
        layout.addWidget(self.headline)
        layout.addWidget(self.timeline)
        layout.addWidget(self.layers)
        layout.addWidget(self.source)

    def show_reading(self, reading, excerpt=None) -> None:
        if reading is None or reading.failure is None:
            engine = f" ({reading.engine})" if reading is not None and reading.engine else ""
            self.headline.setText(f"<span style='color:{GREEN}'>No failure in this log{engine}: no exception, assert, "
                                  "signal or error line.</span>" if reading is not None else "")
            self.timeline.set_stages([s for s, _ in (reading.reached if reading else [])], None)
            self.layers.setText("")
            self.source.hide()
            return
        f = reading.failure
        top = reading.classes[0] if reading.classes else None
        run = " \u00b7 ".join(f"{k} {v}" for k, v in reading.run.items())
        cls = (f"<b>{html.escape(top.title)}</b> ({top.confidence:.0%}): {html.escape('; '.join(top.reasons))}"
               if top else "<b>No general class fits</b>; the failing line is shown as found.")
        others = ", ".join(f"{g.name.replace('_', ' ')} {g.confidence:.0%}" for g in reading.classes[1:3])
        self.headline.setText(
            f"<span style='color:{RED}'>Failed at line {f.line}</span> ({html.escape(f.kind)}): "
            f"<code>{html.escape(f.text[:240])}</code><br>{cls}" + (f"<br>Also possible: {others}" if others else "")
            + f"<br><span style='color:#6b7280'>{html.escape(reading.engine or 'engine unknown')}"
            + (f" \u00b7 {html.escape(run)}" if run else "") + f" \u00b7 died in: {html.escape(stage_label(reading.stage))}"
            + (f" ({html.escape(reading.stage_why)})" if reading.stage else "") + "</span>")
        self.timeline.set_stages([s for s, _ in reading.reached], reading.stage)
        if reading.layers:
            self.layers.setText("\n".join(w.sentence for w in reading.layers[:6]))
        elif reading.named_layers:
            self.layers.setText(f"Layers named: {', '.join(map(str, reading.named_layers[:12]))} (load the model to "
                                "see what they are).")
        else:
            self.layers.setText("")
        frame = reading.engine_frame
        if frame is None:
            self.source.hide()
            return
        head = f"{frame.relative}:{frame.line} in {frame.func}"
        if excerpt is not None:
            body = "\n".join(f"{'>' if n == excerpt.line else ' '} {n:5d}  {text}"
                             for n, text in enumerate(excerpt.lines, excerpt.first_line))
            self.source.setPlainText(f"{head}  ({excerpt.release}: {excerpt.path})\n{body}")
        else:
            self.source.setPlainText(f"{head}\n(no copy of this release's source at hand: unpack the wheel under "
                                     "~/.cache/bringup/sources/<engine>-<version>/ to see the code)")
        self.source.show()
