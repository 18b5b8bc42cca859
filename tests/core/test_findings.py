"""One Finding for the rules, the probe and the diagnosis; one mapping from a finding to the map's marks."""

import pytest

from bringup.app.layermap.highlight import Highlight
from bringup.core.diagnosis import diagnose_log
from bringup.core.finding import SEVERITIES, Finding, severity_rank, worst

CRASH = "ValueError: layer_id=0 not in full attention layers: dict_keys([5, 12, 19, 26, 33, 42])"


def test_a_check_keeps_the_rules_json_shape():
    f = Finding.check("TRITON_LAYER0_PROBE", "error", "Layer 0 is Mamba2.", fix="use --attention-backend intel_xpu",
                      engine_message="ValueError: ...", layers=(0,), source="triton_backend.py", stage="start-up")
    assert list(f.to_json()) == ["code", "severity", "message", "fix", "engine_message", "layers", "source", "stage"]
    assert f.message == "Layer 0 is Mamba2." and f.is_error


def test_a_log_finding_keeps_the_diagnosis_json_shape(nano_layer_map):
    (f,) = [f for f in diagnose_log(CRASH, layer_map=nano_layer_map) if f.code != "UNRECOGNIZED_ERROR"]
    out = f.to_json()
    assert f.kind == "log" and list(out)[:10] == ["code", "severity", "title", "explanation", "fix", "lines", "matched",
                                                  "engine", "source", "layers"]
    assert "message" not in out and out["requested_layer"] == 0 and out["valid_layers"] == [5, 12, 19, 26, 33, 42]
    assert f.message == f"{f.title}: {f.explanation}"


def test_one_severity_list():
    with pytest.raises(ValueError, match="severity 'fatal'"):
        Finding.check("X", "fatal", "no such severity")
    assert [severity_rank(s) for s in SEVERITIES] == [0, 1, 2] and severity_rank("other") == 3
    assert worst([Finding.check("A", "info", "a"), Finding.check("B", "warning", "b")]) == "warning"
    assert worst([]) is None


def test_marks_of_a_layer_index_finding_object_or_json_are_the_same(nano_layer_map):
    f = next(f for f in diagnose_log(CRASH, layer_map=nano_layer_map) if f.requested_layer is not None)
    for given in (f, f.to_json()):
        marks = Highlight.of(given)
        assert marks.requested == [0] and marks.related == [5, 12, 19, 26, 33, 42]
        assert marks.severity == "error" and marks.message == f.title


def test_marks_of_a_rule_finding_and_of_none():
    marks = Highlight.of(Finding.check("TP_KV_HEADS", "warning", "KV heads do not split.", layers=(5, 12)))
    assert marks.requested == [5, 12] and marks.related == [] and marks.severity == "warning"
    assert marks.message == "KV heads do not split."
    assert Highlight.of(Finding.check("NOTE", "info", "nothing about layers")) is None and Highlight.of(None) is None
    assert Highlight.of({"severity": "failure", "layers": [3]}).severity == "error"  # a verdict, read as a severity
