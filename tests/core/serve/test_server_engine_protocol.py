"""The async bridge's engine contract: our Engine keeps it, a half engine does not."""

from __future__ import annotations

import inspect

from bringup.core.engine.engine import Engine
from bringup.core.serve.engine_protocol import SteppingEngine


def test_our_engine_keeps_the_bridges_contract():
    assert issubclass(Engine, SteppingEngine)
    for name in ("add_request", "abort", "has_unfinished", "step", "stats"):
        wanted = [p for p in inspect.signature(getattr(SteppingEngine, name)).parameters.values()
                  if p.kind is p.POSITIONAL_OR_KEYWORD]
        ours = inspect.signature(getattr(Engine, name)).parameters
        assert [p.name for p in wanted] == list(ours)[:len(wanted)], name  # called positionally by the bridge


def test_an_engine_without_step_is_not_one():
    class Half:
        def add_request(self, prompt_ids, params=None, request_id=None):
            pass

        def stats(self):
            return {}

    assert not isinstance(Half(), SteppingEngine)
