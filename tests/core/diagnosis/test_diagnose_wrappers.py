"""One list of "see above" wrapper lines serves both readers: the failure reader ranks a wrapper
below the cause it wraps, and the parser never reports a wrapper as an error of its own."""

from __future__ import annotations

from bringup.core.diagnosis import diagnose
from bringup.core.diagnosis.failure import find_failures

CAUSE_THEN_WRAPPER = """\
Traceback (most recent call last):
  File "/opt/engine/worker.py", line 88, in init_device
    raise ValueError("mamba cache too small")
ValueError: mamba cache too small
RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
"""


def test_the_failure_reader_calls_the_wrapper_a_wrapper_and_keeps_its_cause():
    failures = find_failures(CAUSE_THEN_WRAPPER.splitlines())
    kinds = {f.exception: f.kind for f in failures}
    assert kinds["ValueError"] == "exception"
    assert kinds["RuntimeError"] == "wrapper"


def test_the_parser_reports_the_cause_and_not_the_wrapper():
    d = diagnose(CAUSE_THEN_WRAPPER)
    assert not d.ok
    said = " ".join(f"{f.title} {f.message}" for f in d.findings)
    assert "mamba cache too small" in said
    assert "Engine core initialization failed" not in said


def test_a_wrapper_alone_still_marks_the_log_failed():
    d = diagnose("RuntimeError: Engine core initialization failed. See root cause above.\n")
    assert not d.ok
