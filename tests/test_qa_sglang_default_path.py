"""SGLang has no 'default' alias: its command names the bundled checkpoint's folder; ours keeps 'default'."""

from bringup.app.run.engine_controller import sglang_command
from bringup.core.sources.default_source import sglang_model_path
from bringup.core.engine.default_model import checkpoint_dir
from bringup.core.families import build_layer_map
from bringup.core.rules.command import launch_command
from bringup.core.rules.settings import LaunchSettings
from layermap_helpers import shared_config


def test_default_becomes_the_checkpoint_folder_for_sglang_only():
    lm = build_layer_map(shared_config("nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B.json"), name="nemotron-3-nano-pattern-tiny",
                         source="default")
    sglang = launch_command(lm, "sglang==0.5.23", LaunchSettings(device="cuda"))
    assert sglang[sglang.index("--model-path") + 1] == str(checkpoint_dir())
    ours = launch_command(lm, "embedded", LaunchSettings(device="cpu"))
    assert "default" in ours
    argv = sglang_command("default", port=30001)
    assert argv[argv.index("--model-path") + 1] == str(checkpoint_dir())
    assert sglang_model_path("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B") == "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B"
