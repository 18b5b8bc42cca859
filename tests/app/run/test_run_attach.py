"""Attach to a real, key-protected engine: Ready only once /health answers and metrics arrive, the
key never reaches the log or the settings file, chat counts the server's tokens, https is really
TLS, and an engine that goes away shows as lost. One engine start serves the whole module."""

import re
import time
import urllib.request

import pytest

from bringup.app.run import engine_controller
from bringup.app.settings import app_settings
from bringup.app.tabs.run_tab import RunTab
from server_helpers import API_KEY, start_server


@pytest.fixture(scope="module")
def server():
    srv = start_server("default", "--device", "cpu")  # the bundled checkpoint, cached: the quickest real start
    yield srv
    srv.process.stop()


def _generated_tokens(base_url: str) -> float:
    req = urllib.request.Request(base_url + "/metrics", headers={"Authorization": f"Bearer {API_KEY}"})
    text = urllib.request.urlopen(req, timeout=5).read().decode()
    return sum(float(m.group(1)) for m in re.finditer(r"^bringup:generation_tokens_total(?:\{[^}]*\})? (\S+)$", text, re.M))


def _attach_tab(qtbot, url: str, key: str = "") -> RunTab:
    tab = RunTab()
    qtbot.addWidget(tab)
    tab.select_engine("attach")
    tab.url_field.setText(url)
    tab.key_field.setText(key)
    return tab


def test_without_the_key_the_attach_is_refused_and_says_why(qtbot, server):
    tab = _attach_tab(qtbot, server.base_url)
    readies = []
    tab.controller.ready.connect(readies.append)
    with qtbot.waitSignal(tab.controller.attach_failed, timeout=15000) as failed:
        tab.start()  # /health is open, /metrics is not: never Ready with graphs that stay empty
    assert "API key" in failed.args[0] and not readies
    assert tab.controller.state == "unreachable" and "Ready" not in tab.stage.text()


def test_attach_with_key_counts_server_tokens_and_keeps_the_key_private(qtbot, server):
    tab = _attach_tab(qtbot, server.base_url, API_KEY)
    states = []
    tab.controller.state_changed.connect(states.append)
    with qtbot.waitSignal(tab.controller.ready, timeout=15000):
        tab.start()
    assert states[:2] == ["connecting", "attached"]  # Ready after health and a first metrics sample
    assert "Ready" in tab.stage.text()
    qtbot.waitUntil(lambda: tab.plots is not None and tab.plots.panel_has_data("KV pool"), timeout=10000)

    before = _generated_tokens(server.base_url)
    tab.chat.max_tokens.setValue(12)
    tab.chat.send("Count my tokens")
    qtbot.waitUntil(lambda: len(tab.chat.samples) == 1, timeout=60000)
    sample = tab.chat.samples[0]
    assert sample["tokens_counted_by"] == "server"
    assert sample["tokens"] == _generated_tokens(server.base_url) - before  # the engine's own count
    assert f"{sample['tokens']} tokens" in tab.chat.figures.text()

    settings = app_settings()
    tab.save_state(settings)
    settings.sync()
    assert API_KEY not in open(settings.fileName(), encoding="utf-8", errors="replace").read()
    assert API_KEY not in tab.log.text()
    # "Remember" is offered only where the system keyring can hold the key
    from bringup.app import api_key_store

    assert tab.key_field.remember.isEnabled() == api_key_store.keyring_available()
    if not api_key_store.keyring_available():
        assert "pip install keyring" in tab.key_field.remember.toolTip()
    tab.stop()


def test_https_really_speaks_tls(server):
    from bringup.core.client.chat import stream_chat
    from bringup.core.client.server_http import get, why_unreachable

    tls_url = server.base_url.replace("http://", "https://")
    with pytest.raises(OSError) as err:
        get(tls_url, "/health", timeout=5)
    assert "TLS" in why_unreachable(err.value) or "certificate" in why_unreachable(err.value)
    with pytest.raises(OSError, match="SSL|TLS|ssl"):
        list(stream_chat(tls_url, [{"role": "user", "content": "hi"}], max_tokens=2, timeout=5))


@pytest.mark.timeout(120)
def test_an_engine_that_goes_away_shows_as_lost(qtbot, server):
    """The last test on the shared engine: it goes away under the window. It is ended by closing its
    lifeline pipe only (what the kernel does when the window that started it dies; the guard on
    systems without a parent-death signal), so this also proves `bringup serve` watches it."""
    from lifetime_helpers import wait_gone

    # Within a second by construction: a failed scrape is noticed after at most one interval and one timeout.
    assert engine_controller.SCRAPE_INTERVAL_S + engine_controller.SCRAPE_TIMEOUT_S < 1.0
    tab = _attach_tab(qtbot, server.base_url, API_KEY)
    with qtbot.waitSignal(tab.controller.ready, timeout=15000):
        tab.start()
    t0 = time.monotonic()
    with qtbot.waitSignal(tab.controller.lost, timeout=30000) as lost:
        server.process._close_lifeline()
    print(f"shown as lost {time.monotonic() - t0:.2f} s after the lifeline closed")
    assert wait_gone(server.process.pid, timeout=20)
    server.process.wait_log_drained()
    assert any("the window that started this engine is gone" in line for line in server.process.lines)
    assert any(word in lost.args[0] for word in ("refused", "went away", "no answer"))  # said in words
    assert tab.controller.state == "lost" and "Lost" in tab.stage.text()
    assert tab.reason.isVisibleTo(tab)
    tab.stop()
    qtbot.waitUntil(lambda: tab.controller.state == "idle", timeout=5000)


def test_a_server_without_engine_metrics_is_never_ready(qtbot, monkeypatch):
    """/health answers but /metrics has no engine figures (SGLang without --enable-metrics, or
    some other web server): refused with that reason once the wait is over, never Ready."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Plain(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server)
            body = b"ok" if self.path == "/health" else b"# HELP nothing_here\nprocess_cpu_seconds_total 1.0\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    monkeypatch.setattr(engine_controller, "ATTACH_METRICS_S", 1.0)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Plain)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        tab = _attach_tab(qtbot, f"http://127.0.0.1:{httpd.server_address[1]}")
        readies = []
        tab.controller.ready.connect(readies.append)
        with qtbot.waitSignal(tab.controller.attach_failed, timeout=10000) as failed:
            tab.start()
        assert "--enable-metrics" in failed.args[0] and not readies
        assert tab.controller.state == "unreachable"
    finally:
        httpd.shutdown()
        httpd.server_close()


# A launched stand-in engine: serves /metrics, says it is ready, and answers slowly while a file
# says how many slow answers to give.
SLOW_ENGINE = """
import os, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
flag = sys.argv[1]
class H(BaseHTTPRequestHandler):
    def do_GET(self):
        if os.path.exists(flag):
            n = int(open(flag).read() or 0)
            if n > 0:
                open(flag, "w").write(str(n - 1))
                time.sleep(1.0)
        body = b"bringup:num_running_reqs 0\\n"
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
httpd = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[2])), H)
print("The server is fired up and ready " + "to roll!", flush=True)  # split: the echoed argv must not say it
httpd.serve_forever()
"""


def test_a_launched_engine_answering_slowly_once_is_not_called_lost(qtbot, tmp_path):
    import sys

    from bringup.core.client.engine_process import free_port

    tab = RunTab()
    qtbot.addWidget(tab)
    flag, port = tmp_path / "slow", free_port()
    lost = []
    tab.controller.lost.connect(lost.append)
    with qtbot.waitSignal(tab.controller.ready, timeout=20000):
        tab.controller.launch([sys.executable, "-c", SLOW_ENGINE, str(flag), str(port)], f"http://127.0.0.1:{port}")
    qtbot.wait(600)  # a few quick scrapes first
    flag.write_text("1")  # one answer slower than the scrape timeout: a busy CPU, not a lost engine
    qtbot.waitUntil(lambda: flag.read_text() == "0", timeout=10000)
    qtbot.wait(1500)
    assert lost == [] and tab.controller.state == "ready"
    flag.write_text("3")  # several in a row: lost
    with qtbot.waitSignal(tab.controller.lost, timeout=10000):
        pass
    assert "timed out" in lost[0]
    tab.stop()
    qtbot.waitUntil(lambda: tab.controller.state == "idle", timeout=10000)
