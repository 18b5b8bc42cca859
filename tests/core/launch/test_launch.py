"""One launch description (core/launch/): Validate shows `launch.argv()`, Run starts the same
arguments with an interpreter and an endpoint. SGLang has no 'default' alias: its command names the
bundled checkpoint's folder; ours keeps 'default'."""

import shlex
import sys

import pytest
from layermap_helpers import shared_config

from bringup.core.sources.default_model import checkpoint_dir
from bringup.core.families import build_layer_map
from bringup.core.launch import Endpoint, Launch, shell
from bringup.core.validate import validate
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


@pytest.mark.parametrize("target, settings", [
    ("embedded", LaunchSettings(device="cpu", dtype="bfloat16")),
    ("sglang==0.5.23", LaunchSettings(device="xpu", attention_backend="intel_xpu", linear_attn_backend="triton",
                                      mamba_strategy="no_buffer", page_size=64, tp=2, kv_dtype="fp8_e4m3")),
    ("sglang==0.5.19", LaunchSettings(device="rocm", disable_radix_cache=True, disable_overlap_schedule=True)),
])
def test_run_adds_only_the_interpreter_and_the_endpoint(target, settings, nano_layer_map):
    result = validate(nano_layer_map, target, settings, model_path="/models/nano")
    shown = shlex.split(result.command)  # what the Validate tab's command box holds
    ran = result.launch.argv(endpoint=Endpoint("127.0.0.1", 31234), python=sys.executable)  # what Run starts
    if target == "embedded":
        shown_program, run_program, tail = ["bringup", "serve"], [sys.executable, "-m", "bringup", "serve"], []
    else:
        shown_program, run_program, tail = (["python", "-m", "sglang.launch_server"],
                                            [sys.executable, "-m", "sglang.launch_server"], ["--enable-metrics"])
    tail = ["--host", "127.0.0.1", "--port", "31234"] + tail
    assert shown[:len(shown_program)] == shown_program
    assert ran == run_program + shown[len(shown_program):] + tail


def test_every_sglang_setting_reaches_the_command():
    s = LaunchSettings(device="rocm", attention_backend="triton", linear_attn_backend="triton", mamba_strategy="extra_buffer",
                       page_size=64, tp=2, pp=2, disable_radix_cache=True, disable_overlap_schedule=True, dtype="bfloat16",
                       kv_dtype="fp8_e4m3", mamba_ssm_dtype="float32")
    text = shell(Launch("sglang", "m", s).argv())
    assert text == ("python -m sglang.launch_server --model-path m --device cuda --attention-backend triton "
                    "--linear-attn-backend triton --mamba-radix-cache-strategy extra_buffer --page-size 64 --tp-size 2 "
                    "--pp-size 2 --disable-radix-cache --disable-overlap-schedule --dtype bfloat16 "
                    "--kv-cache-dtype fp8_e4m3 --mamba-ssm-dtype float32")


def test_embedded_names_only_options_bringup_serve_has():
    from bringup.core.engine import facts

    argv = Launch("embedded", "m", LaunchSettings(device="cpu", page_size=32, kv_dtype="bfloat16", dtype="float16")).argv()
    flags = [a for a in argv if a.startswith("--")]
    assert flags == ["--device", "--dtype"] and set(flags) <= facts.serve_flags()
    assert Launch("embedded", "m", LaunchSettings(), device="auto").argv() == ["bringup", "serve", "m"]
