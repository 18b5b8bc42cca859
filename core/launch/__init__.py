"""Launching an engine: one `Launch` value (what Validate checked and shows as the command, and what
Run starts), one argv builder per engine (`embedded.py`, `sglang.py`, `vllm.py`)."""

from bringup.core.launch.launch import Endpoint, Launch, launch_for, shell
from bringup.core.launch.model_path import model_path

__all__ = ["Endpoint", "Launch", "launch_for", "model_path", "shell"]
