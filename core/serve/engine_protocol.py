"""What the async bridge (`async_engine.AsyncEngine`) needs of an engine: five calls, made only from
its loop thread. `bringup.core.engine.Engine` is one; a test double or another engine can be another."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class SteppingEngine(Protocol):
    def add_request(self, prompt_ids, params=None, request_id: str | None = None, **kw) -> Any:
        """Queue a request; returns it (its id is what outputs carry)."""

    def abort(self, request_id: str) -> bool:
        """Drop a request, freeing its pages and state slot; False when it is unknown or done."""

    def has_unfinished(self) -> bool:
        """Whether a step would do work."""

    def step(self) -> list:
        """Run one scheduler step; the StepOutputs of the requests it advanced."""

    def stats(self) -> dict:
        """Pool and token counters for the metrics gauges."""
