"""Live graphs of a running engine: pools, usage, tokens/s, requests, latency (pyqtgraph).

Samples go into one RingSeries (an hour of history); the plots redraw on a timer, not per sample,
so a fast scrape never floods the window. A panel whose source reports nothing shows "no data".
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QGridLayout, QWidget

from bringup.app.run.ring import RingSeries
from bringup.core.client.metrics_scrape import EngineSample

# (panel title, unit, [(series, label, colour, dashed)], scale applied for display)
# Latency comes as one mean per scrape interval that saw a request finish, so most intervals have
# none: those series are drawn as points (POINT_SERIES), which show even when no two are adjacent.
PANELS = [
    ("KV pool", "tokens", [("kv_used", "used", "#E8913A", False), ("kv_total", "total", "#B5621A", True)], 1.0),
    ("State pool", "slots", [("state_used", "used", "#4F86B8", False), ("state_total", "total", "#2B5797", True)], 1.0),
    ("Pool usage", "%", [("full_token_usage", "KV", "#E8913A", False), ("swa_token_usage", "SWA", "#E0B04A", False),
                         ("mamba_usage", "state", "#4F86B8", False), ("token_usage", "bottleneck", "#D62828", True)],
     100.0),
    ("Throughput", "tok/s", [("gen_tok_s", "generation", "#3E9C8F", False), ("prompt_tok_s", "prompt", "#8C7BC4", False)], 1.0),
    ("Requests", "", [("running", "running", "#1F2A44", False), ("queued", "queued", "#C77700", False)], 1.0),
    ("Latency", "ms", [("ttft_s", "time to first token", "#A77AA6", False), ("itl_s", "inter-token", "#6FB7C9", False)], 1000.0),
    # Last, so the six panels above keep their places; hidden while the engine reports no SWA pool.
    ("SWA pool", "tokens", [("swa_used", "used", "#E0B04A", False), ("swa_total", "total", "#A07A1E", True)], 1.0),
]
SERIES = [name for _, _, lines, _ in PANELS for name, *_ in lines]
OPTIONAL_PANELS = {"SWA pool"}  # shown only once their series carry data (most models have no SWA pool)
POINT_SERIES = {"ttft_s", "itl_s"}


def legend_html(lines: list[tuple[str, str, str, bool]]) -> str:
    """The legend as text in the panel's title, above the plot: it never sits on the data."""
    marks = []
    for name, label, colour, dashed in lines:
        glyph = "●" if name in POINT_SERIES else ("╌╌" if dashed else "━━")
        marks.append(f"<span style='color:{colour}'>{glyph}</span>&nbsp;{label}")
    return "&nbsp;&nbsp;".join(marks)
WINDOW_S = 120.0  # what "follow" shows; zoom out with the mouse for the whole hour


class LivePlots(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        pg.setConfigOptions(antialias=True, foreground="#2E3440", background="#FBFBF9")
        self.history = RingSeries(SERIES)
        self.paused = False
        self._t0: float | None = None
        self._curves: dict[str, pg.PlotDataItem] = {}
        self._scale: dict[str, float] = {}
        self._no_data: list[tuple[pg.TextItem, list[str], pg.PlotItem]] = []
        self._plots: list[pg.PlotWidget] = []
        grid = self._grid = QGridLayout(self)
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setSpacing(6)
        for i, (title, unit, lines, scale) in enumerate(PANELS):
            w = pg.PlotWidget()
            w.setMinimumHeight(150)
            item = w.getPlotItem()
            item.setTitle(f"<span style='font-size:10pt'><b>{title}</b>{' (' + unit + ')' if unit else ''}</span>"
                          f"<br><span style='font-size:8pt'>{legend_html(lines)}</span>")
            item.showGrid(x=True, y=True, alpha=0.25)
            item.setLabel("bottom", "seconds")
            item.setMouseEnabled(x=True, y=False)
            item.setLimits(yMin=0)  # every series is a count, a rate or a share: no negative axis on flat zeros
            item.setDownsampling(auto=True, mode="peak")
            item.setClipToView(True)
            for name, label, colour, dashed in lines:
                pen = pg.mkPen(colour, width=2, style=Qt.PenStyle.DashLine if dashed else Qt.PenStyle.SolidLine)
                if name in POINT_SERIES:
                    curve = item.plot([], [], pen=None, symbol="o", symbolSize=6, symbolBrush=colour,
                                      symbolPen=None, name=label)
                else:
                    curve = item.plot([], [], pen=pen, name=label, connect="finite")
                self._curves[name] = curve
                self._scale[name] = scale
            text = pg.TextItem("no data", color="#7B8394", anchor=(0.5, 0.5))
            item.addItem(text, ignoreBounds=True)
            self._no_data.append((text, [n for n, *_ in lines], item))
            self._plots.append(w)
            w.setVisible(title not in OPTIONAL_PANELS)
            grid.addWidget(w, i // 3, i % 3)
        self._timer = QTimer(self)
        self._timer.setInterval(250)
        self._timer.timeout.connect(self.redraw)
        self._timer.start()
        self.redraw()

    def set_served(self, served) -> None:
        """Show the state pool only for a model with recurrent layers: an engine reports a pool of
        a few slots even for a model without any, and an empty graph of them says what is not there."""
        stateless = served is not None and served.state_layers == ()
        for (title, *_), plot in zip(PANELS, self._plots):
            if title == "State pool":
                plot.setVisible(not stateless)
                plot.setToolTip(f"{served.name} has no recurrent layers: no state pool" if stateless else "")
        # The panels close up: no hole where the state pool was.
        shown = [plot for (title, *_), plot in zip(PANELS, self._plots) if not (stateless and title == "State pool")]
        for i, plot in enumerate(shown):
            self._grid.addWidget(plot, i // 3, i % 3)

    def panel_visible(self, title: str) -> bool:
        return next(not plot.isHidden() for (t, *_), plot in zip(PANELS, self._plots) if t == title)

    # data in
    def add_sample(self, sample: EngineSample) -> None:
        if self._t0 is None:
            self._t0 = sample.t
        values = sample.to_json()
        self.history.append(sample.t - self._t0, {k: values.get(k) for k in SERIES})

    def clear(self) -> None:
        self.history.clear()
        self._t0 = None
        self.redraw()

    def set_paused(self, paused: bool) -> None:
        self.paused = paused
        if not paused:
            self.redraw()

    # drawing
    def redraw(self) -> None:
        if self.paused:
            return
        t = self.history.times()
        for name, curve in self._curves.items():
            y = self.history.values(name) * self._scale[name] if len(t) else np.array([])
            if name in POINT_SERIES and len(t):  # points: only the intervals that measured one
                keep = np.isfinite(y)
                curve.setData(t[keep], y[keep])
            else:
                curve.setData(t, y)
        for (text, names, item), widget, (title, *_rest) in zip(self._no_data, self._plots, PANELS):
            has = any(self.history.has_data(n) for n in names)
            if title in OPTIONAL_PANELS:
                widget.setVisible(has)
            text.setVisible(not has)
            if not has:
                (x0, x1), (y0, y1) = item.viewRange()
                text.setPos((x0 + x1) / 2, (y0 + y1) / 2)
            elif len(t):
                item.setXRange(max(0.0, t[-1] - WINDOW_S), max(t[-1], 1.0), padding=0.02)

    def panel_has_data(self, title: str) -> bool:
        for (text, names, item), (panel_title, *_rest) in zip(self._no_data, PANELS):
            if panel_title == title:
                return any(self.history.has_data(n) for n in names)
        raise KeyError(title)

    # export
    def export_csv(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(self.history.to_csv(), encoding="utf-8")
        return path

    def export_png(self, path: str | Path) -> Path:
        path = Path(path)
        if not self.grab().save(str(path), "PNG"):
            raise OSError(f"could not write {path}")
        return path
