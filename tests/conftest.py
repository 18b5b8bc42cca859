"""Shared fixtures and markers for the whole suite.

Markers (registered in pyproject.toml):
- `gpu`: needs a CUDA or XPU device that Triton can use; skipped elsewhere, with the reason.
- `slow`: starts a real engine or server (seconds each); `pytest -m "not slow"` leaves them out.

The shared model configs must be there (a clear stop, not a collection traceback, when they are
not), and nothing the tests do may touch the user's own settings or engine records.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

import bringup  # noqa: F401  (first: takes the checkout's root, and its bare kernels/, off sys.path)

# Helpers shared by the rooms' test folders (tests/helpers/) are imported by bare name.
sys.path.insert(0, str(Path(__file__).resolve().parent / "helpers"))

from repo_paths import NANO_CONFIG, REPO, SHARED, SHARED_MODELS  # noqa: E402

# Set before any test (and so inherited by every child process the tests start).
_SCRATCH = Path(tempfile.mkdtemp(prefix="bringup-tests-"))
os.environ["BRINGUP_SETTINGS"] = str(_SCRATCH / "settings.ini")
os.environ["BRINGUP_ENGINES_DIR"] = str(_SCRATCH / "engines")
# Where the installed bringup is not this checkout (a non-editable install, as the device runs use),
# `python -c` children started in the checkout would find its bare bringup/ (no rooms in it) first:
# they leave the folder they start in off their path. An editable install (make test, CI) needs
# nothing, and the tests whose children stand in for an engine from their own folder rely on that.
if not Path(bringup.__file__).resolve().is_relative_to(REPO):
    os.environ["PYTHONSAFEPATH"] = "1"
# CPU engines decode eagerly unless a test asks for the compiled step (a compile takes a minute on two
# cores; tests/core/engine/test_engine_cpu_compiled.py covers it with one engine).
os.environ.setdefault("BRINGUP_CPU_COMPILE", "0")
# On a GPU, every float32 Triton dot at IEEE precision from the first compile on (the engine asks
# for it when it builds a float32 model, but kernel tests compile before that; kernels/precision.py).
if os.environ.get("BRINGUP_TEST_DEVICE", "cpu").split(":")[0] == "cuda":
    os.environ.setdefault("TRITON_F32_DEFAULT", "ieee")


def pytest_configure(config) -> None:
    if not SHARED_MODELS.is_dir():
        pytest.exit(
            f"the tests read real model configs from {SHARED_MODELS}, which is missing.\n"
            f"Check out the shared folder next to this repository ({SHARED}: models/, reference/, DESIGN.md), "
            "or run only tests that need none of it, e.g. `pytest tests/project/test_layering.py`.",
            returncode=4)


def pytest_unconfigure(config) -> None:
    import shutil

    shutil.rmtree(_SCRATCH, ignore_errors=True)


def _no_gpu_reason() -> str | None:
    """Why the `gpu` tests cannot run here, or None when a device can run them (imports torch)."""
    from bringup.kernels.triton import availability

    reasons = {d: availability.triton_reason(d) for d in availability.GPU_DEVICE_TYPES}
    if any(reason is None for reason in reasons.values()):
        return None
    return "no device for the Triton kernels (" + "; ".join(f"{d}: {r}" for d, r in reasons.items()) + ")"


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return  # torch is imported only when a gpu test was collected
    reason = _no_gpu_reason()
    if reason is not None:
        for item in gpu_items:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def shared_models() -> Path:
    """The folder of real model configs (../shared/models), read in place, never copied."""
    return SHARED_MODELS


@pytest.fixture(scope="session")
def nano_layer_map():
    """NVIDIA-Nemotron-3-Nano-30B-A3B's layer map from its real config (attention at 5, 12, 19, 26, 33, 42)."""
    from bringup.core.sources.resolve import load_layer_map

    return load_layer_map(str(NANO_CONFIG))


def _children() -> list[psutil.Process]:
    out = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


@pytest.fixture
def no_orphans():
    """Fails the test if a process it started outlives it by more than a few seconds (orphaned engines
    keep device memory and ports)."""
    before = {p.pid for p in _children()}
    yield
    deadline = time.monotonic() + 5.0
    while True:
        left = [p for p in _children() if p.pid not in before]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert not left, "processes left behind: " + ", ".join(f"{p.pid} {' '.join(p.cmdline()[:4])}" for p in left)


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    """One `bringup serve` (tiny model, 4 running requests) shared by every server test module."""
    from server_helpers import shared_server

    yield from shared_server(tmp_path_factory)
