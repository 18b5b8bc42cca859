"""Streamed events survive clients that split lines like str.splitlines (httpx's iter_lines)."""

import json

from bringup.core.engine.request import StepOutput
from bringup.core.serve.formats import ChatFormat, CompletionFormat, GenerateFormat, Result
from bringup.core.serve.protocol import Work
from bringup.core.serve.streaming import _event


def test_an_event_with_line_separators_in_its_text_stays_one_line():
    text = "a\u2028b\x85c\u2029d\nE"  # random weights generate such characters
    out = StepOutput("r", [5, 6], text, False, None, 3, 2)
    work = Work([[1]], [None], False, True)
    for fmt in (CompletionFormat("m"), ChatFormat("m"), GenerateFormat()):
        res = Result("r", 3)
        res.add(out)
        event = _event(next(iter(fmt.stream_chunk(res, 0, out, work))))
        lines = event.splitlines()
        assert len(lines) == 2 and lines[1] == "", event  # the event, then the blank line that ends it
        body = json.loads(lines[0].removeprefix("data: "))
        got = body.get("text") or body["choices"][0].get("text") or body["choices"][0]["delta"]["content"]
        assert got == text
