"""The Run tab's log counts our own command's error line (`bringup serve: ...`, exit 2) as an error."""

import pytest

from bringup.core.client.startup_log import line_severity


@pytest.mark.parametrize("line,severity", [
    ("bringup serve: device 'xpu' is not available with this torch build (2.13.0+cpu); use --device cpu", "error"),
    ("bringup serve: error: unrecognized arguments: --tp 3", "error"),
    ("[2026-07-23 10:00:00] Load weight begin. avail mem=22.37 GB", "info"),
    ("the bringup serve: command is documented in the README", "info"),
])
def test_our_own_error_lines(line, severity):
    assert line_severity(line) == severity
