"""The window's look: a light, calm style sheet on top of Qt's Fusion style."""

from __future__ import annotations

STYLE = """
QMainWindow, QWidget#central { background: #F3F4F6; }
QFrame#modelBar { background: #FFFFFF; border-bottom: 1px solid #DDE1E7; }
QLabel#modelName { font-size: 13pt; font-weight: 600; color: #1F2A44; }
QLabel#modelFacts { color: #4A5468; font-size: 10pt; }
QLabel#progressText { color: #4A5468; }
QFrame#mapPanel { background: #FBFBF9; border-bottom: 1px solid #DDE1E7; }
QScrollArea#mapScroll, QWidget#mapHolder { background: #FBFBF9; }
QLabel#sectionTitle { font-weight: 600; color: #1F2A44; font-size: 10pt; }
QFrame#layerDetails, QFrame#layerDetails QScrollArea, QFrame#layerDetails QLabel { background: #FFFFFF; }
QLabel#detailsTitle { font-size: 12pt; font-weight: 600; color: #1F2A44; }
QLabel#detailsSubtitle { color: #4A5468; }
QFrame#divider { color: #DDE1E7; }
QFrame#errorBanner { background: #FDECEC; border: 1px solid #F1B5B5; border-radius: 4px; }
QLabel#errorText { color: #8F1D1D; }
QFrame#errorBanner QToolButton { border: none; color: #8F1D1D; font-weight: 600; }
QFrame#runningBadge { background: #EEF7EF; border-bottom: 1px solid #CFE3D1; }
QFrame#runningBadge[mismatch="true"] { background: #FFF4E0; border-bottom: 1px solid #F0C987; }
QFrame#leftoverBar { background: #FFF4E0; border: 1px solid #F0C987; border-radius: 4px; }
QFrame#leftoverBar QLabel { color: #6B4500; }
QTabWidget::pane { border: none; background: #FFFFFF; }
QTabBar::tab { padding: 6px 16px; color: #4A5468; background: transparent; border: none;
               border-bottom: 2px solid transparent; }
QTabBar::tab:selected { color: #1F2A44; border-bottom: 2px solid #4479AB; font-weight: 600; }
QTabBar::tab:hover { color: #1F2A44; }
QToolButton { padding: 3px 8px; border: 1px solid #D5D9E0; border-radius: 4px; background: #FFFFFF; color: #2E3440; }
QToolButton:checked { background: #E3ECF6; border-color: #4479AB; }
QToolButton:hover { border-color: #9AA5B5; }
QToolTip { background: #FFFFFF; color: #2E3440; border: 1px solid #C9CED6; padding: 4px; }
"""
