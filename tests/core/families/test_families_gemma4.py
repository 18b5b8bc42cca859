"""Gemma 4: MoE beside the dense MLP, KV-sharing layers, exact parameter counts (torch-free family module)."""

from __future__ import annotations

import pytest

from bringup.core.errors import UserError
from bringup.core.families import build_layer_map
from bringup.core.planner.plan import plan_memory

from layermap_helpers import A4B, A4B_TEXT, SHARING_TEXT

# gemma-4-26B-A4B's text_config, from its published numbers (the checkpoint's config.json is not
# reachable here); transformers 5 builds 25,233,141,760 parameters from it on the meta device.
def test_26b_a4b_moe_beside_the_dense_mlp_in_every_layer():
    m = build_layer_map(A4B)
    assert m.params_total == 25_233_141_760  # transformers' meta-device count (test_layermap_params checks it live)
    assert m.moe_layers == list(range(30)) and m.mlp_layers == []
    layer = m.layers[0]
    assert (layer.moe.experts, layer.moe.top_k, layer.moe.expert_intermediate) == (128, 8, 704)
    assert layer.moe.dense_mlp_alongside is True and layer.mlp.intermediate == 2112
    routed = 3 * 2816 * 704  # one expert: gate, up, down
    assert layer.params - layer.active_params == (128 - 8) * routed
    assert m.params_active == m.params_total - 30 * (128 - 8) * routed
    assert m.full_attention_layers == [5, 11, 17, 23, 29]
    full = m.layers[5]
    assert (full.attention.head_dim, full.attention.kv_heads, full.attention.k_eq_v) == (512, 2, True)
    assert full.kv_elems_per_token == 2 * 2 * 512 and m.layers[0].kv_elems_per_token == 2 * 8 * 256
    assert not any("approximate" in n for n in m.notes)


def test_kv_sharing_layers_read_the_last_earlier_layer_of_their_kind():
    m = build_layer_map({"model_type": "gemma4", "text_config": SHARING_TEXT})
    # 5 sliding then 1 full, twice; layers 8-11 reuse: sliding ones read layer 7, the full one layer 5.
    assert m.kv_shared_layers == [8, 9, 10, 11]
    assert [m.layers[i].kv_shared_from for i in (8, 9, 10, 11)] == [7, 7, 7, 5]
    assert all(m.layers[i].kv_pool_index is None and m.layers[i].kv_elems_per_token == 0 for i in (8, 9, 10, 11))
    assert not m.layers[8].is_kv and m.layers[7].is_kv
    assert m.kv_layers == list(range(8)) and [m.layers[i].kv_pool_index for i in range(8)] == list(range(8))
    # Still attention layers on the map.
    assert m.full_attention_layers == [5, 11] and 8 in m.sliding_attention_layers
    doc = m.to_json()
    assert doc["kv_shared_layers"] == [8, 9, 10, 11] and doc["layers"][11]["kv_shared_from"] == 5
    assert "kv_shared_from" not in doc["layers"][0]


def test_the_planner_leaves_kv_sharing_layers_out_of_kv_bytes():
    shared = build_layer_map({"model_type": "gemma4", "text_config": SHARING_TEXT})
    own = build_layer_map({"model_type": "gemma4", "text_config": dict(SHARING_TEXT, num_kv_shared_layers=0)})
    plan_shared = plan_memory(shared, device_memory=1 << 34)
    plan_own = plan_memory(own, device_memory=1 << 34)
    per_layer = {i: l.kv_elems_per_token for i, l in enumerate(own.layers)}
    saved = sum(per_layer[i] for i in (8, 9, 10, 11)) * 2  # bf16 KV cache
    # The embedded plan keeps sliding layers in the SWA pool: count both pools' bytes per token.
    def kv_bytes(plan):
        return plan.kv_bytes_per_token + plan.swa_bytes_per_token

    assert kv_bytes(plan_own) - kv_bytes(plan_shared) == saved > 0
    assert any("reuse an earlier layer's KV" in n for n in plan_shared.notes)


def test_kv_sharing_without_a_producer_is_a_clear_error():
    bad = dict(SHARING_TEXT, num_hidden_layers=8, num_kv_shared_layers=3)  # layer 5 (full) would read nothing
    with pytest.raises(UserError, match="no earlier layer of that type"):
        build_layer_map({"model_type": "gemma4", "text_config": bad})
    with pytest.raises(UserError, match="num_kv_shared_layers"):
        build_layer_map({"model_type": "gemma4", "text_config": dict(SHARING_TEXT, num_kv_shared_layers=12)})


def test_moe_block_without_expert_settings_names_the_missing_field():
    with pytest.raises(UserError, match="num_experts"):
        build_layer_map(dict(SHARING_TEXT, enable_moe_block=True))


def test_gemma4_maps_without_torch_or_transformers(tmp_path):
    import json
    import os
    import subprocess
    import sys

    from layermap_helpers import REPO

    path = tmp_path / "config.json"
    path.write_text(json.dumps(A4B))
    code = (
        "import sys\nfrom bringup.core.sources.resolve import load_layer_map\n"
        f"m = load_layer_map({str(path)!r})\n"
        "print(m.params_total, sorted(k for k in sys.modules if k.split('.')[0] in ('torch', 'transformers')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                         env=dict(os.environ, HF_HUB_OFFLINE="1"), timeout=60)
    assert out.stdout.split() == ["25233141760", "[]"], out.stderr[-2000:]
