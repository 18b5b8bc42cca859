"""One `bringup serve` child process on a tiny checkpoint, shared by the server tests."""

from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path


API_KEY = "sk-test-key"
# Mamba, attention, MoE and MLP blocks in a short NemotronH stack: every code path, fast steps.
SHORT_PATTERN = "M*EM*E-"
_PORT = re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)")


def tiny_checkpoint(root: Path) -> Path:
    from bringup.core.sources.default_model import TINY_TEST_SPEC, ensure_default_checkpoint

    return ensure_default_checkpoint(replace(TINY_TEST_SPEC, pattern=SHORT_PATTERN), root)


@dataclass
class Server:
    process: object  # bringup.core.client.engine_process.EngineProcess
    base_url: str
    checkpoint: Path

    @property
    def log(self) -> str:
        return "\n".join(self.process.lines)

    def headers(self) -> dict:
        return {"Authorization": f"Bearer {API_KEY}"}


def start_server(checkpoint: Path, *extra: str, timeout: float = 120.0, key_in_env: bool = False) -> Server:
    """Start `bringup serve` on a free port (--port 0) and wait for its ready line. The API key goes
    on the command line, or with `key_in_env` in $BRINGUP_API_KEY."""
    return wait_ready(launch_server(checkpoint, *extra, key_in_env=key_in_env), timeout)


def launch_server(checkpoint: Path, *extra: str, key_in_env: bool = False) -> Server:
    """Start `bringup serve` without waiting (the caller works meanwhile, then calls `wait_ready`)."""
    import os

    from bringup.core.client.engine_process import EngineProcess

    key = [] if key_in_env else ["--api-key", API_KEY]
    argv = [sys.executable, "-m", "bringup", "serve", str(checkpoint), "--port", "0", *key, *extra]
    proc = EngineProcess(argv, env={**os.environ, "BRINGUP_API_KEY": API_KEY} if key_in_env else None)
    proc.start()
    return Server(proc, "", checkpoint)


def wait_ready(server: Server, timeout: float = 120.0) -> Server:
    """Wait for a launched server's ready line; fills in its base_url. Stops it when it never gets there."""
    proc = server.process
    deadline = time.monotonic() + timeout
    port = None
    while time.monotonic() < deadline:
        text = "\n".join(proc.lines)
        m = _PORT.search(text)
        port = port or (m and int(m.group(1)))
        if port and "The server is fired up and ready to roll!" in text:
            server.base_url = f"http://127.0.0.1:{port}"
            return server
        if not proc.running:
            break
        time.sleep(0.1)
    proc.stop()
    raise RuntimeError("bringup serve did not become ready:\n" + "\n".join(proc.tail(40)))


def shared_server(tmp_path_factory):
    """The one `bringup serve` shared by every server test module (conftest.py's `server` fixture)."""
    checkpoint = tiny_checkpoint(tmp_path_factory.mktemp("server_models"))
    srv = start_server(checkpoint, "--max-running-requests", "4")
    yield srv
    code = srv.process.stop()
    assert code is not None


def wait_idle(client, timeout: float = 20.0) -> dict:
    """Poll /server_info until nothing runs or waits; return it."""
    deadline = time.monotonic() + timeout
    while True:
        info = client.get("/server_info").json()
        stats = info["stats"]
        if stats["num_running"] == 0 and stats["num_queued"] == 0:
            return info
        if time.monotonic() > deadline:
            raise AssertionError(f"the engine is still busy: {stats}")
        time.sleep(0.05)
