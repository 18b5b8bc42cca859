"""SGLang has no 'default' alias: its command names the bundled checkpoint's folder; ours keeps 'default'."""

from layermap_helpers import shared_config

from bringup.core.engine.default_model import checkpoint_dir
from bringup.core.families import build_layer_map
from bringup.core.launch import Endpoint, Launch
from bringup.core.rules import validate
from bringup.core.rules.settings import LaunchSettings
from bringup.core.sources.default_source import sglang_model_path


def test_default_becomes_the_checkpoint_folder_for_sglang_only():
    lm = build_layer_map(shared_config("nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B.json"), name="nemotron-3-nano-pattern-tiny",
                         source="default")
    sglang = validate(lm, "sglang==0.5.23", LaunchSettings(device="cuda"), model_path="default").argv
    assert sglang[sglang.index("--model-path") + 1] == str(checkpoint_dir())
    ours = validate(lm, "embedded", LaunchSettings(device="cpu"), model_path="default").argv
    assert "default" in ours
    argv = Launch("sglang", "default", LaunchSettings(device="cuda")).argv(endpoint=Endpoint("127.0.0.1", 30001))
    assert argv[argv.index("--model-path") + 1] == str(checkpoint_dir())
    assert sglang_model_path("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B") == "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B"
