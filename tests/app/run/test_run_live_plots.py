"""Live plots of counts and rates never show a negative y axis, even when every value is zero (an idle engine)."""

from bringup.app.run.live_plots import PANELS, LivePlots
from bringup.core.client.metrics_scrape import EngineSample


def test_idle_engine_plots_start_at_zero(qtbot):
    plots = LivePlots()
    qtbot.addWidget(plots)
    plots.resize(900, 500)
    plots.show()
    for t in range(5):
        plots.add_sample(EngineSample(t=float(t), kv_used=0, kv_total=32768, state_used=0, state_total=8, running=0,
                                      queued=0, full_token_usage=0.0, mamba_usage=0.0, token_usage=0.0))
    plots.redraw()
    for widget, (title, *_rest) in zip(plots._plots, PANELS):
        box = widget.getPlotItem().getViewBox()
        box.updateAutoRange()
        assert box.viewRange()[1][0] >= 0, title


def test_swa_pool_panel_shows_only_when_the_engine_has_one(qtbot):
    plots = LivePlots()
    qtbot.addWidget(plots)
    plots.show()
    swa = plots._plots[[title for title, *_ in PANELS].index("SWA pool")]
    plots.add_sample(EngineSample(t=0.0, kv_used=0, kv_total=64))
    plots.redraw()
    assert not plots.panel_has_data("SWA pool") and not swa.isVisible()
    plots.add_sample(EngineSample(t=1.0, kv_used=8, kv_total=64, swa_used=12, swa_total=48, swa_token_usage=0.25))
    plots.redraw()
    assert plots.panel_has_data("SWA pool") and swa.isVisible()
    assert plots.history.values("swa_token_usage")[-1] == 0.25
    plots.clear()
    assert not swa.isVisible()
