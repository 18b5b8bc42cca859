"""Graceful drain on SIGTERM / SIGINT: stop admitting, let running requests finish, then exit.

uvicorn on its own stops after a fixed wait and cancels what is still running: streams end with no
error event and no `[DONE]`, and SIGINT surfaces as tracebacks. Here the first signal starts a
drain instead: new requests get 503 with Retry-After (and /health says so), requests that have not
produced a token yet are ended at once (another server can take them), running ones get up to the
grace (`--drain-grace`, default 30 s) to finish; whatever is left is then ended with an error
event and `[DONE]`, and only when every response has been written does uvicorn close. A second
signal skips the rest of the grace; a third exits without waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading

import uvicorn

log = logging.getLogger("bringup.server")

HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM)
# After the engine requests end, how long their responses get to write the last events.
FLUSH_S = 5.0


class DrainingServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, state):
        super().__init__(config)
        self.state = state
        self.signals = 0
        self.interrupted = False  # the drain began with SIGINT (Ctrl-C): `serve` then exits 130
        self.hurry = asyncio.Event()
        self.drain_task: asyncio.Task | None = None

    @contextlib.contextmanager
    def capture_signals(self):
        # Replaces uvicorn's: no re-raising the signal after serve() (that turns SIGINT into a traceback).
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        loop = asyncio.get_running_loop()
        for sig in HANDLED_SIGNALS:
            loop.add_signal_handler(sig, self.on_signal, sig)
        try:
            yield
        finally:
            for sig in HANDLED_SIGNALS:
                loop.remove_signal_handler(sig)

    def on_signal(self, sig: int) -> None:
        self.signals += 1
        name = signal.Signals(sig).name
        if self.signals == 1:
            self.interrupted = sig == signal.SIGINT
            self.drain_task = asyncio.ensure_future(self.drain(name))
        elif self.signals == 2:
            log.info("%s again: ending every request now", name)
            self.hurry.set()
        else:
            log.info("%s a third time: exiting without waiting", name)
            self.force_exit = self.should_exit = True

    async def drain(self, name: str) -> None:
        state, aengine = self.state, self.state.aengine
        loop = asyncio.get_running_loop()
        state.draining = True
        grace = state.limits.drain_grace_s
        log.info("%s received: draining; new requests get 503; %d request(s) in the engine get up to %g s to "
                 "finish (a second signal ends them now)", name, aengine.num_unfinished, grace)
        aengine.abort_unstarted("the server is shutting down before this request started; send it to another server")
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._engine_idle(), timeout=grace)
        if aengine.num_unfinished:
            why = "a second signal" if self.hurry.is_set() else f"the {grace:g} s grace ran out"
            log.info("Drain: ending %d request(s) still running (%s)", aengine.num_unfinished, why)
            aengine.abort_all(f"the server is shutting down ({why}); the output so far is incomplete")
        # Admitted requests count until their response is written: wait for the last events to go out.
        deadline = loop.time() + FLUSH_S
        while state.admission.requests and loop.time() < deadline:
            await asyncio.sleep(0.02)
        log.info("Drain done; closing the server")
        self.should_exit = True

    async def _engine_idle(self) -> None:
        aengine = self.state.aengine
        while aengine.num_unfinished and not self.hurry.is_set():
            await asyncio.sleep(0.05)
