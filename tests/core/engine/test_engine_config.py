"""EngineConfig: one value for the engine's settings, built alike by serve, bench, the GUI's launch and tests."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from bringup.core.engine import facts
from bringup.core.engine.config import EngineConfig
from bringup.core.errors import UserError


def _parsed(module, argv):
    parser = argparse.ArgumentParser()
    module.configure(parser)
    return parser.parse_args(argv)


def test_defaults_are_the_engines_facts():
    config = EngineConfig("m")
    assert (config.page_size, config.ssm_dtype) == (facts.DEFAULT_PAGE_SIZE, facts.DEFAULT_SSM_DTYPE)
    assert config.chunked_prefill_size is None  # the planner's choice (core/planner/step_budget.py)


@pytest.mark.parametrize("changes, message", [
    ({"mem_fraction": 1.5}, r"--mem-fraction 1.5 must be in \(0, 1\]"),
    ({"mem_fraction": 0.0}, r"--mem-fraction 0 must be in \(0, 1\]"),
    ({"max_running_requests": 0}, "--max-running-requests 0 must be at least 1"),
    ({"chunked_prefill_size": 0}, "--chunked-prefill-size 0 must be at least 1"),
    ({"cpu_threads": 0}, "--cpu-threads 0 must be at least 1"),
    ({"page_size": 0}, "page_size 0 must be at least 1"),
    ({"max_running_requests": 2.5}, "--max-running-requests 2.5 must be a whole number"),
])
def test_numbers_that_cannot_work_are_refused_with_the_option_name(changes, message):
    with pytest.raises(UserError, match=message):
        EngineConfig("m", **changes)


def test_serve_and_bench_build_the_same_config_from_the_same_flags():
    from bringup.core.cli import bench, serve

    argv = ["some/model", "--device", "cpu", "--dtype", "float32", "--cpu-compile", "off", "--cpu-threads", "2",
            "--max-running-requests", "3", "--mem-fraction", "0.5"]
    served = EngineConfig.from_args(_parsed(serve, argv))
    benched = EngineConfig.from_args(_parsed(bench, argv))
    assert served == benched == EngineConfig("some/model", device="cpu", dtype="float32", cpu_compile=False,
                                             cpu_threads=2, max_running_requests=3, mem_fraction=0.5)


def test_serve_arguments_round_trip_through_serves_parser():
    """What the GUI's launch renders is what `bringup serve` rebuilds, setting for setting."""
    from bringup.core.cli import serve

    config = EngineConfig("some/model", device="cpu", dtype="bfloat16", load_format="dummy", mem_fraction=0.7,
                          max_running_requests=8, chunked_prefill_size=4096, cpu_compile=True, cpu_threads=1)
    argv = config.serve_arguments()
    assert argv[0] == "some/model" and "--cpu-compile" in argv and argv[argv.index("--cpu-compile") + 1] == "on"
    assert EngineConfig.from_args(_parsed(serve, argv)) == config
    assert EngineConfig("m").serve_arguments() == ["m"]  # defaults leave the command short
    assert EngineConfig("m", page_size=32).unsupported_by_serve() == ["page_size"]


def test_the_guis_launch_renders_its_engine_config():
    from bringup.core.launch import Launch
    from bringup.core.launch.embedded import engine_config
    from bringup.core.rules.settings import LaunchSettings

    launch = Launch("embedded", "default", LaunchSettings(device="cpu", dtype="float32"))
    assert engine_config(launch) == EngineConfig("default", device="cpu", dtype="float32")
    assert launch.argv() == ["bringup", "serve", "default", "--device", "cpu", "--dtype", "float32"]


def test_the_engine_takes_only_a_config():
    from bringup.core.engine.engine import Engine

    with pytest.raises(TypeError, match="EngineConfig"):
        Engine("some/model")


def test_building_a_config_never_imports_torch():
    code = ("import sys; from bringup.core.engine.config import EngineConfig; EngineConfig('m', device='cpu'); "
            "assert 'torch' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
