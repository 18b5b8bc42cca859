"""Streamed events survive clients that split lines like str.splitlines (httpx's iter_lines)."""

import json

from bringup.core.serve.server import _event


def test_an_event_with_line_separators_in_its_text_stays_one_line():
    text = "a\u2028b\x85c\u2029d\nE"  # random weights generate such characters
    event = _event({"choices": [{"text": text}]})
    lines = event.splitlines()
    assert len(lines) == 2 and lines[1] == "", event  # the event, then the blank line that ends it
    assert json.loads(lines[0].removeprefix("data: "))["choices"][0]["text"] == text
