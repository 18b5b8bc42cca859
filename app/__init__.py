"""The Qt application (PySide6 + pyqtgraph). Never imports torch on its start-up path."""
