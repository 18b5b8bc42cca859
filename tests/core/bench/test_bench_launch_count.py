"""The CPU launch counter (core/bench/launch_count.py): which aten ops it takes for GPU kernels, and a
decode step of a small Qwen3 with the GPU's op set under Triton's interpreter: the count is the same
step after step, grows by the same amount per block, and each known fusion lowers it by exactly the
launches it saves per layer (q, k and v as one product: two; gate and up as one product with
act_and_mul after: two)."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

from bringup.core.bench.launch_count import LaunchCounter
from triton_interpreter import run_interpreted


def test_views_allocations_and_plain_copies_are_no_kernels_casts_and_products_are():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 8, generator=g, dtype=torch.bfloat16)
    w = torch.randn(6, 8, generator=g, dtype=torch.bfloat16)
    with torch.inference_mode(), LaunchCounter() as counter:
        v = x.view(8, 4).t()[1:]  # views
        torch.empty(3, 3)
        same = x.to(torch.bfloat16)  # nothing to do: the tensor itself
        x[0].copy_(x[1])  # a contiguous same-dtype copy: a memcpy on a GPU
        wide = x.float()  # a cast: one kernel
        y = F.linear(x, w)  # one product
        v.contiguous()  # a strided copy: one kernel
        x.clone()  # contiguous: a memcpy
        x[0].copy_(wide[1])  # a copy with a cast: one kernel
    assert same is x and y.shape == (4, 6)
    assert counter.counts == {"aten:to": 1, "aten:linear": 1, "aten:contiguous": 1, "aten:copy_": 1}
    assert counter.total == 4


def _qwen3(layers: int) -> dict:
    return {"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"], "hidden_size": 64, "intermediate_size": 96,
            "num_hidden_layers": layers, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
            "vocab_size": 256, "rms_norm_eps": 1e-6, "max_position_embeddings": 1024, "rope_theta": 10000.0,
            "tie_word_embeddings": False, "hidden_act": "silu", "bos_token_id": 1, "eos_token_id": 2}


_COUNTS = """
import json, sys, torch
torch.manual_seed(0)
from bringup.core.bench.launch_count import count_config, use_gpu_ops_on_cpu
from bringup.core.engine.models.fused_gate_up import FusedGateUp
from bringup.core.engine.models.fused_qkv import FusedQKV
use_gpu_ops_on_cpu()
configs = json.loads(sys.argv[1])
out = {}
for name, config in configs.items():
    FusedQKV.fuse_qkv = not name.endswith("unfused-qkv")
    FusedGateUp.fuse_gate_up = not name.endswith("unfused-mlp")
    first = count_config(config)
    again = count_config(config)
    out[name] = [first["kernels_per_step"], again["kernels_per_step"], dict(first["names"])]
print(json.dumps(out))
"""


def test_a_small_qwen3_decode_step_counts_the_same_each_time_and_each_fusion_saves_two_per_layer():
    pytest.importorskip("triton")
    configs = {"2": _qwen3(2), "4": _qwen3(4), "4-unfused-qkv": _qwen3(4), "4-unfused-mlp": _qwen3(4)}
    counts = json.loads(run_interpreted(_COUNTS, json.dumps(configs), timeout=600).strip().splitlines()[-1])
    for name, (first, again, _) in counts.items():
        assert first == again, name  # stable
    two, four = counts["2"][0], counts["4"][0]
    assert four - two == (four - two) // 2 * 2 and four > two  # the same per block
    per_block = (four - two) / 2
    assert two - 2 * per_block == four - 4 * per_block  # what is not per block: embedding, head, sampling
    assert counts["4-unfused-qkv"][0] - four == 2 * 4  # three products of q, k, v instead of one, in 4 layers
    # gate, up, act, mul instead of one gate/up product and act_and_mul, in each of the 4 layers
    assert counts["4-unfused-mlp"][0] - four == 2 * 4
    names = counts["4"][2]
    # Triton launches are counted, one per launch: a residual add + norm before each part and the final norm,
    # one q/k norm + rotary + cache write + decode attention per layer.
    assert names["triton:_add_rms_norm_kernel"] == 2 * 4 + 1
    assert names["triton:_rope_paged_decode_kernel"] == 4
    assert names["triton:_act_and_mul_kernel"] == 4
    assert names["aten:linear"] == 4 * (2 + 2) + 1  # q/k/v, o; gate/up, down per layer; the LM head


def test_small_widths_keep_a_partial_rotary_inside_the_smaller_head():
    """MiniMax-M1 rotates 64 of its 128 head dims; at 16 dims the config must rotate 8, not 64."""
    from bringup.core.bench.launch_count import small_widths

    small = small_widths({"head_dim": 128, "rotary_dim": 64, "hidden_size": 6144})
    assert (small["head_dim"], small["rotary_dim"]) == (16, 8)
    assert "rotary_dim" not in small_widths({"head_dim": 128})
