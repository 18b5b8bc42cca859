"""Bundled data: the model catalogue, icons, themes, demo profiles."""

from pathlib import Path

RESOURCES = Path(__file__).resolve().parent
