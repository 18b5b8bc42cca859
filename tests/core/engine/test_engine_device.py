"""Device selection for the engine: names, auto, and clear errors for devices this torch lacks."""

import pytest
import torch

from bringup.core.engine import device as devices
from bringup.core.errors import UserError


def test_cpu_and_auto():
    assert devices.resolve_device("cpu") == torch.device("cpu")
    auto = devices.resolve_device("auto")
    if not (hasattr(torch, "accelerator") and torch.accelerator.is_available()):
        assert auto == torch.device("cpu")
    assert devices.free_memory(torch.device("cpu")) > 0
    assert devices.device_name(torch.device("cpu"))


def test_unknown_device_name():
    with pytest.raises(UserError, match="unknown device 'gpu0'; use cpu, cuda, xpu"):
        devices.resolve_device("gpu0")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this torch has CUDA")
def test_missing_accelerator_says_what_to_do():
    with pytest.raises(UserError, match=r"device 'cuda:1' is not available with this torch build .*use --device cpu"):
        devices.resolve_device("cuda:1")
