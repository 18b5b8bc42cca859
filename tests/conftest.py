"""Suite-wide set-up: the shared model configs must be there, and nothing the tests do may touch
the user's own settings or engine records."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[2] / "shared"

# Set before any test (and so inherited by every child process the tests start).
_SCRATCH = Path(tempfile.mkdtemp(prefix="bringup-tests-"))
os.environ["BRINGUP_SETTINGS"] = str(_SCRATCH / "settings.ini")
os.environ["BRINGUP_ENGINES_DIR"] = str(_SCRATCH / "engines")


def pytest_configure(config) -> None:
    if not (SHARED / "models").is_dir():
        pytest.exit(
            f"the tests read real model configs from {SHARED / 'models'}, which is missing.\n"
            f"Check out the shared folder next to this repository ({SHARED}: models/, reference/, DESIGN.md), "
            "or run only tests that need none of it, e.g. `pytest tests/test_layering.py`.",
            returncode=4)


def pytest_unconfigure(config) -> None:
    import shutil

    shutil.rmtree(_SCRATCH, ignore_errors=True)
