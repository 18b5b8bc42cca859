"""Bounded reading of any log file: size cap with head and tail kept, encodings, binary refused."""

from __future__ import annotations

import codecs

import pytest

from bringup.core.diagnosis import diagnose
from bringup.core.diagnosis.reader import NotText, read_path

FAIL = "Traceback (most recent call last):\n  File \"x.py\", line 1, in f\nKeyError: 'model.layers.20.linear_attn'\n"


def test_utf16_and_bom_logs_are_decoded(tmp_path):
    for name, data in (("le.log", codecs.BOM_UTF16_LE + FAIL.encode("utf-16-le")),
                       ("be.log", codecs.BOM_UTF16_BE + FAIL.encode("utf-16-be")),
                       ("nobom.log", FAIL.encode("utf-16-le")),
                       ("bom8.log", codecs.BOM_UTF8 + FAIL.encode())):
        path = tmp_path / name
        path.write_bytes(data)
        log = read_path(path)
        assert log.text.startswith("Traceback"), name
        assert diagnose(log.text).reading.named_layers == (20,), name


def test_binary_data_is_refused_with_a_reason(tmp_path):
    path = tmp_path / "core"
    path.write_bytes(bytes(200_000))
    with pytest.raises(NotText, match="not a text log"):
        read_path(path)


def test_a_log_over_the_cap_keeps_head_and_tail_and_says_what_was_skipped(tmp_path):
    path = tmp_path / "big.log"
    head = "vllm serve my/model --tensor-parallel-size 2\n"
    path.write_text(head + "INFO chatter line\n" * 50_000 + FAIL)
    log = read_path(path, cap=100_000)
    assert log.skipped > 0 and "skipped" in log.note
    assert log.text.startswith(head) and log.text.rstrip().endswith("linear_attn'")
    assert len(log.text) < 110_000
    result = diagnose(log.text)
    assert result.reading.run.get("tp") == "2" and result.reading.named_layers == (20,)


def test_dev_zero_is_refused_quickly():
    with pytest.raises(NotText):
        read_path("/dev/zero")
