"""The session report holds the A/B results the Compare tab ran: the servers' verdict and table."""

from __future__ import annotations

from bringup.core.compare.ab import ABResult
from bringup.core.compare.agreement import Answer, compare_answers
from bringup.core.compare.verdict import Threshold, judge
from bringup.core.session_report import SessionRecord, render_html


def test_the_servers_verdict_and_table_reach_the_report():
    a, b = Answer("Paris.", [1, 2], "ids"), Answer("Lyon.", [3, 2], "ids")
    results = [compare_answers("The capital of France is", a, b)]
    t = Threshold(0.05, 0.5, [], "A alone against 1 at once")
    doc = ABResult("http://a:1", "http://b:2", ("generate", "generate"), results, t, judge(results, t), 2,
                   [(a.text, b.text)]).to_json()
    page = render_html(SessionRecord(ab={"servers": doc}))
    assert "A/B: two servers" in page and "<b>differ</b>" in page and "The capital of France is" in page
    assert "<td>0%</td><td>0</td><td>1</td><td>3</td>" in page


def test_the_layer_ab_reaches_the_report_with_its_flips_in_block_order():
    from ab_traces import parted_traces

    from bringup.core.compare.divergence import compare_traces

    doc = compare_traces(*parted_traces()).to_json()
    page = render_html(SessionRecord(ab={"layers": doc}))
    assert "layer 0&#x27;s conv state parts after step 0; block 0 parts at step 1 (decode, arithmetic)" in page
    assert "3 routing flip(s), counted apart (all of them after the runs part" in page
    assert "<td>3:1, 10:2</td>" in page  # block order, not the JSON keys' text order ("10" < "3")


def test_the_layer_table_keeps_its_columns_with_a_long_block_kind():
    from ab_traces import parted_traces

    from bringup.core.cli.ab import render_layers
    from bringup.core.compare.divergence import compare_traces
    from bringup.core.compare.layer_ab import LayerAB, Setting

    a, b = parted_traces()
    a["layers"] = [(i, "sliding_attention", f) for i, _, f in a["layers"]]  # gpt-oss's 21-character kind
    text = render_layers(LayerAB("tiny", Setting(), Setting(), [], compare_traces(a, b)))
    header, *rows = text.splitlines()[2:5]
    column = header.index("rel err") + len("rel err")  # right-aligned numbers end under the header's end
    assert all(row[column - 1] != " " and row[column] == " " for row in rows), text
    assert rows[1].endswith("3:1, 10:2")
