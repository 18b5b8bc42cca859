"""Colours, names and fonts of the layer map: one calm palette, red kept for highlights only."""

from __future__ import annotations

from PySide6.QtGui import QColor, QFont

from bringup.core.numerics.error_bands import ERROR_COLORS, error_band  # noqa: F401 (the map's legend reads both)

# Mixer colours: attention families warm (they hold the KV cache), recurrent families cool
# (they hold per-request state). Red is never a mixer colour: it means "named by a finding".
MIXER_COLORS = {
    "attention": "#E8913A",
    "sliding_attention": "#F3C577",
    "sparse_attention": "#B8621B",
    "mamba2": "#4479AB",
    "mamba": "#86AED3",
    "gated_delta_net": "#33877B",
    "kimi_delta_attention": "#6DBE9A",
    "lightning_attention": "#7A68B5",
    "short_conv": "#6FB7C9",
    "none": "#FFFFFF",
}
# Falcon-H1 runs both in parallel: drawn as a split cell of the two colours.
SPLIT_MIXERS = {"attention+mamba2": ("attention", "mamba2")}
FFN_COLORS = {"moe": "#A77AA6", "mlp": "#B9A476", "none": "#FFFFFF"}

MIXER_NAMES = {
    "attention": "full attention",
    "sliding_attention": "sliding-window attention",
    "sparse_attention": "sparse attention (indexer)",
    "mamba2": "Mamba2",
    "mamba": "Mamba (v1)",
    "gated_delta_net": "gated DeltaNet",
    "kimi_delta_attention": "Kimi delta attention",
    "lightning_attention": "lightning attention",
    "short_conv": "short conv",
    "attention+mamba2": "attention + Mamba2 (parallel)",
    "none": "no mixer",
}
FFN_NAMES = {"moe": "MoE", "mlp": "dense MLP", "none": "no FFN"}

BACKGROUND = QColor("#FBFBF9")
TEXT = QColor("#2E3440")
MUTED = QColor("#646D7E")
EMPTY_FILL = QColor("#ECEEF2")
SELECTED = QColor("#1F2A44")
HOVER = QColor("#5E6B85")
ATTENTION_TAG = QColor("#A4540F")
HIGHLIGHT = QColor("#D62828")
SEVERITY_COLORS = {"error": QColor("#D62828"), "warning": QColor("#C77700"), "info": QColor("#2F6DB5")}
STAGE_COLORS = ["#E6EEF7", "#F4EBDD", "#E6F2EA", "#F1E6F1", "#EEF0E1", "#E3F0F2", "#F5E4E4", "#E9E7F5"]
STAGE_TEXT = QColor("#5A6478")


def _relative_luminance(c: QColor) -> float:
    def channel(v: float) -> float:
        return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4

    return 0.2126 * channel(c.redF()) + 0.7152 * channel(c.greenF()) + 0.0722 * channel(c.blueF())


def contrast(a: QColor, b: QColor) -> float:
    """WCAG contrast ratio of two colours (1 to 21)."""
    la, lb = sorted((_relative_luminance(a), _relative_luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def text_on(background: QColor) -> QColor:
    """White or dark text, whichever reads better on `background`."""
    white = QColor("#FFFFFF")
    return white if contrast(white, background) >= contrast(TEXT, background) else TEXT


def error_colour(rel_err: float | None, tolerance: float | None) -> QColor:
    """A comparison's per-block relative error against its tolerance (the Numerics page and the map alike)."""
    return QColor(ERROR_COLORS[error_band(rel_err, tolerance)])


def mixer_color(mixer: str) -> QColor:
    return QColor(MIXER_COLORS.get(mixer, "#B8BEC8"))


def ffn_color(ffn: str) -> QColor:
    return QColor(FFN_COLORS.get(ffn, "#B8BEC8"))


def stage_color(stage: int) -> QColor:
    return QColor(STAGE_COLORS[stage % len(STAGE_COLORS)])


def font(point_size: float, bold: bool = False) -> QFont:
    f = QFont()
    f.setPointSizeF(point_size)
    f.setBold(bold)
    return f
