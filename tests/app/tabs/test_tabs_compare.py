"""The Compare tab: the layer-level A/B runs as a child in the background, fills the step timeline,
and marks on the map the block where the two settings part (an injected wrong scale at block 3);
a server comparison that cannot run says why. Offscreen, with a tiny real checkpoint."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bringup.app.tabs.compare_tab import CompareTab

from engine_helpers import tiny_nemotron_h


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return tiny_nemotron_h(tmp_path_factory.mktemp("compare-tab") / "tiny")


def test_compare_layers_shows_the_timeline_and_marks_the_block_that_parts(qtbot, checkpoint, no_orphans):
    tab = CompareTab()
    qtbot.addWidget(tab)
    tab.set_layer_map(SimpleNamespace(source=str(checkpoint)))
    tab.setting_b.setText("kernels=reference,dtype=float32,fault=scale@3=1.02")
    tab.steps.setValue(1)
    tab.look.setChecked(True)  # both run again keeping block 3 whole: the exact error there is shown
    highlights = []
    tab.highlight_requested.connect(highlights.append)
    with qtbot.waitSignal(tab.finished, timeout=240000) as blocker:
        assert tab.compare_layers()
        assert tab.runner.running and not tab.layers_button.isEnabled()  # the window goes on meanwhile
        assert not tab.compare_servers()  # one comparison at a time
    kind, doc = blocker.args
    assert kind == "layers" and doc["first"]["block"] == 3 and doc["first"]["step"] == 0
    assert tab.table.rowCount() == 2 and tab.table.item(0, 1).text() == "prefill"
    assert "block 3" in tab.verdict.text() and "differ" in tab.verdict.text()
    assert "output of block 3 at step 0: exact rel err 2.00e-02" in tab.verdict.text()
    assert highlights[-1].requested == [3] and dict(highlights[-1].errors)[3] == pytest.approx(0.02, rel=1e-2)
    from bringup.core.session_report import SessionRecord, render_html

    page = render_html(SessionRecord(ab=tab.report_section()["ab"]))
    assert "A/B: two engine settings" in page and "block 3 parts at step 0 (prefill, arithmetic)" in page
    assert tab.layers_button.isEnabled()


def test_a_server_comparison_that_cannot_run_says_why(qtbot):
    tab = CompareTab()
    qtbot.addWidget(tab)
    tab.url_a.setText("http://127.0.0.1:9")
    tab.url_b.setText("not-a-url")
    with qtbot.waitSignal(tab.finished, timeout=60000) as blocker:
        assert tab.compare_servers()
    assert blocker.args[0] == "servers" and isinstance(blocker.args[1], str)
    assert "Could not compare" in tab.verdict.text() and "not a server address" in tab.verdict.text()
    assert tab.servers_button.isEnabled()


def test_a_dump_the_run_tab_started_becomes_setting_a_unless_the_user_typed_one(qtbot):
    tab = CompareTab()
    qtbot.addWidget(tab)
    tab.use_dump("/tmp/bringup-sglang-dump")
    assert tab.setting_a.text() == "dump=/tmp/bringup-sglang-dump"
    tab.use_dump("/tmp/second")  # our own offer is replaced by the next
    assert tab.setting_a.text() == "dump=/tmp/second"
    tab.setting_a.setText("device=cpu,dtype=bfloat16")
    tab.use_dump("/tmp/third")
    assert tab.setting_a.text() == "device=cpu,dtype=bfloat16"


def test_a_state_that_parts_first_is_what_the_map_names_and_flips_come_in_block_order(qtbot):
    from ab_traces import parted_traces

    from bringup.core.compare.divergence import compare_traces

    tab = CompareTab()
    qtbot.addWidget(tab)
    highlights = []
    tab.highlight_requested.connect(highlights.append)
    tab._done("layers", compare_traces(*parted_traces()).to_json())  # as the child's --json document arrives
    mark = highlights[-1]
    assert mark.message.startswith("layer 0's conv state parts first, after step 0 (prefill")
    assert "block 0's output then parts at step 1" in mark.message and mark.requested == [0]
    assert tab.table.item(1, 6).text() == "3:1, 10:2"
    assert "all of them after the runs part" in tab.verdict.text()


def test_a_calibrated_comparison_says_within_whose_noise_and_where_the_tolerances_come_from(qtbot):
    from ab_traces import parted_traces

    from bringup.core.compare.divergence import compare_traces

    tab = CompareTab()
    qtbot.addWidget(tab)
    a, _ = parted_traces()
    same = compare_traces(a, a, noise=compare_traces(a, a), extra=7.8e-3, noise_name="bf16 noise",
                          calibration="per block and step, the distance of cpu bfloat16 reference kernels from A")
    tab._done("layers", same.to_json())
    text = tab.verdict.text()
    assert "<b>agree</b>: B matches A at every block and state within bf16 noise" in text
    assert "tolerances: per block and step, the distance of cpu bfloat16 reference kernels" in text
    doc = same.to_json() | {"answer_logprob_diffs": [0.001, 0.4], "answer_floor": 0.098}
    tab._done("layers", doc)
    assert "differ by up to 0.4000 nats, past the bf16 noise floor 0.098" in tab.verdict.text()
    from bringup.core.session_report import SessionRecord, render_html

    page = render_html(SessionRecord(ab=tab.report_section()["ab"]))
    assert "tolerances (bf16 noise): per block and step, the distance of cpu bfloat16 reference kernels" in page


def test_the_next_comparison_can_start_as_soon_as_a_result_arrives(qtbot):
    """The runner is free when its result reaches the tab, not some time after (its thread may still be
    winding down): a click right then, or a listener of `finished`, starts the next one."""
    tab = CompareTab()
    qtbot.addWidget(tab)
    tab.url_a.setText("http://127.0.0.1:9")
    tab.url_b.setText("not-a-url")
    again = []
    tab.finished.connect(lambda *_: again.append(tab.compare_servers()) if not again else None)
    with qtbot.waitSignals([tab.finished, tab.finished], timeout=60000):
        assert tab.compare_servers()
    assert again == [True]
