"""A GGUF file's quantized blocks stay blocks in the engine (`--dtype auto`): the layers hold the
file's bytes, the model computes what the dequantised float32 model computes within bf16's
rounding, and an explicit dtype still dequantises at load."""

from __future__ import annotations

import pytest
import torch
from gguf_helpers import byte_level_vocab, tiny_llama, write_gguf
from models_helpers import Req, make_pools, run_engine

from bringup.core.engine.gguf_weights import GgufEmbedding, GgufLinear, prepare_for_cpu
from bringup.core.engine.loader import load_model, parameter_count, weights_bytes
from bringup.core.families import build_layer_map
from bringup.core.sources.gguf_file import read_gguf_config
from bringup.kernels.reference.gguf_blocks import dequantize_blocks

pytest.importorskip("gguf")


@pytest.fixture(scope="module", params=[False, True], ids=["own-head", "tied"])
def gguf_file(request, tmp_path_factory):
    tokens, merges = byte_level_vocab()
    hf = tiny_llama(len(tokens), tie_word_embeddings=request.param)
    return write_gguf(hf, tmp_path_factory.mktemp("blocks") / "tiny-blocks.gguf", tokens, merges, quant="blocks")


def test_blocks_are_kept_as_the_file_holds_them(gguf_file):
    kept = load_model(gguf_file, dtype="auto").model
    floats = load_model(gguf_file, dtype="float32").model
    types = {m.ggml_type for m in kept.modules() if isinstance(m, GgufLinear)}
    assert types >= {"Q4_0", "Q4_1"}
    assert isinstance(kept.input_embedding, GgufEmbedding) and kept.input_embedding.ggml_type == "Q8_0"
    assert all(m.weight.dtype == torch.uint8 for m in kept.modules() if isinstance(m, (GgufLinear, GgufEmbedding)))
    assert "Q4_0" in kept.weight_scheme.label and kept.weight_scheme.quantized_linears > 0
    assert "Q4_0" in floats.weight_scheme.dequantised_from and floats.weight_scheme.quantized_linears == 0
    assert weights_bytes(kept) < 0.3 * weights_bytes(floats)


def test_kept_blocks_compute_what_the_dequantised_model_computes(gguf_file):
    kept = load_model(gguf_file, dtype="auto").model
    assert kept.dtype == torch.float32  # kept blocks run float32 activations (bf16 only inside the int4 product)
    assert prepare_for_cpu(kept) > 0  # the 4-bit types in torch's int4 layout, Q8_0 blockwise
    floats = load_model(gguf_file, dtype="float32").model
    prompt = list(range(5, 30))
    kv, state = make_pools(kept, dtype=kept.dtype)
    a = run_engine(kept, [Req(prompt, [25], steps=3)], kv_pool=kv, state_pool=state)[0]
    b = run_engine(floats, [Req(prompt, [25], steps=3)])[0]
    x, y = a.logits[0].float(), b.logits[0]
    tol = 3e-2 * y.abs().max()
    assert (x - y).abs().max() <= tol
    # Random weights leave near ties: the kept model's pick is the reference's best within the tolerance.
    assert y[x.argmax()] >= y.max() - tol


def test_what_the_model_says_it_runs_is_what_its_layers_run(gguf_file):
    """/server_info's params and weights (the Run tab's line) on kept blocks: the weights counted as
    values, not as block bytes or emptied stand-ins (SmolLM2 said 35,136 params, its norms alone);
    the products named as each layer runs them; the dequantised model names every ggml type."""
    kept = load_model(gguf_file, dtype="auto").model
    floats = load_model(gguf_file, dtype="float32").model
    values = sum(p.numel() for p in floats.parameters())
    assert parameter_count(kept) == parameter_count(floats) == values
    prepare_for_cpu(kept)
    assert parameter_count(kept) == values  # the re-laid layers' stand-ins hold no bytes, still their weights
    assert floats.weight_scheme.dequantised_from == "GGUF Q4_0, Q4_1, Q8_0 blocks"  # not only the commonest type
    linears = sum(isinstance(m, torch.nn.Linear) for m in floats.modules())
    assert floats.weight_scheme.dense_linears == linears > 0 and floats.weight_scheme.quantized_linears == 0
    layers = read_gguf_config(gguf_file)["num_hidden_layers"]
    own_head = 0 if kept.tied else 1
    products = f"cpu: int4 product (Q4_0 x{4 * layers}, Q4_1 x{3 * layers + own_head})"
    assert kept.weight_scheme.kernels["gguf_linear"] == (products if own_head else products + "; cpu: widened Q8_0 (Q8_0 x1)")
    assert kept.weight_scheme.products_dtype == "bfloat16" and kept.weight_scheme.to_json()["products_dtype"] == "bfloat16"


def test_the_reference_kernels_leave_the_blocks_float32_products(gguf_file, monkeypatch):
    monkeypatch.setenv("BRINGUP_KERNELS", "reference")
    kept = load_model(gguf_file, dtype="auto").model
    assert prepare_for_cpu(kept) == 0
    assert kept.weight_scheme.products_dtype == "" and kept.weight_scheme.kernels == {"gguf_linear": "reference"}


def test_blocks_moved_to_the_cpu_layouts_are_freed(gguf_file):
    """Once packed, a layer's own blocks must not stay alive behind an empty view of them (an empty
    slice keeps its whole storage: the resident memory of issue 30's goal)."""
    kept = load_model(gguf_file, dtype="auto").model
    prepare_for_cpu(kept)
    moved = [m for m in kept.modules() if isinstance(m, GgufLinear) and m.weight.shape[1] == 0]
    assert moved
    assert all(m.weight.untyped_storage().nbytes() == 0 for m in moved)


def test_a_tied_q8_0_head_and_its_embedding_share_one_widened_form(gguf_file):
    """The tied Q8_0 output projection is widened once (bf16 codes, float32 scales); the embedding
    reads its rows from the same tensors, so neither the blocks nor a float32 copy stay."""
    kept = load_model(gguf_file, dtype="auto").model
    blocks = kept.input_embedding.weight.data.clone()
    prepare_for_cpu(kept)
    head, embed = kept.lm_head, kept.input_embedding
    if not kept.tied:  # an own Q4_1 head: the int4 product; the Q8_0 embedding keeps its blocks
        assert head.widened is None and head.int4 is not None and embed.widened is None
        return
    assert head.widened is not None and embed.widened is head.widened and head.dense is None
    assert head.weight is embed.weight and head.weight.untyped_storage().nbytes() == 0
    assert "widened" in kept.weight_scheme.kernels["lm_head"]
    ids = torch.tensor([0, 7, 7, embed.num_embeddings - 1])
    assert torch.equal(embed(ids), dequantize_blocks(blocks, "Q8_0", embed.embedding_dim)[ids])


def test_q6_k_layers_run_a_bf16_copy_and_their_blocks_go(tmp_path):
    from bringup.core.engine.gguf_weights import copies_held, cpu_copies_bytes
    from bringup.kernels.reference.gguf_blocks import row_bytes

    tokens, merges = byte_level_vocab()
    hf = tiny_llama(len(tokens), hidden_size=256, intermediate_size=256, num_hidden_layers=1, head_dim=64)
    path = write_gguf(hf, tmp_path / "kquants.gguf", tokens, merges, quant="kquants")  # MLP down and lm_head Q6_K
    kept = load_model(path, dtype="auto").model
    q6 = {name: m.weight.data.clone() for name, m in kept.named_modules()
          if isinstance(m, GgufLinear) and m.ggml_type == "Q6_K"}
    assert set(q6) >= {"lm_head"} and len(q6) == 2
    prepare_for_cpu(kept)
    for name, blocks in q6.items():
        m = kept.get_submodule(name)
        assert m.form == "bf16 copy" and m.weight.untyped_storage().nbytes() == 0
        assert torch.equal(m.dense, dequantize_blocks(blocks, "Q6_K", m.in_features).to(torch.bfloat16))
    assert kept.weight_scheme.kernels["lm_head"] == "bf16 copy (Q6_K)"
    assert "cpu: bf16 copy (Q6_K x2)" in kept.weight_scheme.kernels["gguf_linear"]
    assert copies_held(kept) == "2 bf16 copy"
    # what the copies add: 2 bytes a weight, less the 210 / 256 the blocks held
    assert cpu_copies_bytes(kept) == sum(2 * m.out_features * m.in_features - m.out_features * row_bytes("Q6_K", m.in_features)
                                         for m in map(kept.get_submodule, q6))


def test_the_map_shows_each_layer_s_ggml_type(gguf_file):
    m = build_layer_map(read_gguf_config(gguf_file))
    layer = m.layers[0]
    assert layer.weights.mixer.key == "gguf_q4_0" and layer.weights.ffn.key == "gguf_q4_1"
    assert layer.weights.ffn.bits == pytest.approx(5.0)


def test_blocks_are_kept_only_where_the_device_has_products_for_them(gguf_file):
    from bringup.core.engine.loader import checkpoint_quantization

    config = read_gguf_config(gguf_file)
    assert checkpoint_quantization(config, "auto", "cpu")[1] is True
    assert checkpoint_quantization(config, "auto", "cuda")[1] is False  # no GPU GGUF kernel: dequantised at load
    assert checkpoint_quantization(config, "float32", "cpu")[1] is False


@pytest.mark.slow  # starts a real engine
def test_server_info_names_the_kept_blocks_as_they_run(gguf_file):
    from bringup.core.client.running_label import ServedModel
    from bringup.core.engine.config import EngineConfig
    from bringup.core.engine.engine import Engine

    logged = []
    engine = Engine(EngineConfig(str(gguf_file), device="cpu", dtype="auto", max_running_requests=1, context_length=64,
                                 cpu_compile=False), log=logged.append)
    info = engine.server_info()
    assert info["params"] == sum(p.numel() for p in load_model(gguf_file, dtype="float32").model.parameters())
    assert info["weights"]["products_dtype"] == "bfloat16"
    assert "GGUF Q4_0, Q4_1, Q8_0 blocks, bfloat16 products · float32" in ServedModel.from_info(info).label
    assert not any("oneDNN" in line for line in logged)  # no plain linear: no oneDNN copy to speak of
    widened = [line for line in logged if "GGUF layers' copies" in line]
    assert len(widened) == (1 if engine.model.tied else 0) and (not widened or "(1 widened)" in widened[0])


@pytest.mark.slow  # starts a real engine, in a child: a module once imported stays
def test_an_eager_cpu_engine_never_loads_torch_s_compiler(gguf_file):
    """torch._dynamo and torch._inductor hold ~70 MiB of resident memory each time they load: an
    engine whose CPU steps run eager must not load them, neither to name inductor's cache in the
    start-up line nor for a whole prompt's causal mask."""
    import subprocess
    import sys

    if read_gguf_config(gguf_file).get("tie_word_embeddings"):
        pytest.skip("one file is enough: the head plays no part")
    code = f"""
import sys
from bringup.core.engine.config import EngineConfig
from bringup.core.engine.engine import Engine
from bringup.core.engine.sampling import SamplingParams
lines = []
e = Engine(EngineConfig({str(gguf_file)!r}, device="cpu", dtype="auto", max_running_requests=1, context_length=64,
                        cpu_compile=False), log=lines.append)
e.add_request(list(range(5, 20)), SamplingParams(max_new_tokens=3, temperature=0.0, ignore_eos=True), detokenize=False)
while e.has_unfinished():
    e.step()
print(sorted(m for m in ("torch._dynamo", "torch._inductor") if m in sys.modules), any("inductor" in l for l in lines))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[-2] == "[] False", out.stdout + out.stderr[-2000:]


def test_q5_0_is_kept_and_a_type_without_a_product_is_read_dequantised_and_named(tmp_path):
    """A Q4_K_M file of a model whose rows are no multiple of 256 holds llama.cpp's fallbacks (Gemma 3
    270M: Q5_0 attention and MLP): Q5_0 layers keep their blocks and run a bf16 copy; a type with no
    product here (Q5_1) runs float32 dequantised at load, and the label says so where it named the
    kept types alone."""
    from torch import nn

    tokens, merges = byte_level_vocab()
    path = write_gguf(tiny_llama(len(tokens)), tmp_path / "with-q5.gguf", tokens, merges, quant="q5")
    kept = load_model(path, dtype="auto").model
    downs = [m for name, m in kept.named_modules() if name.endswith("down_proj")]
    outs = [m for name, m in kept.named_modules() if name.endswith("o_proj")]
    assert downs and all(isinstance(m, GgufLinear) and m.ggml_type == "Q5_0" for m in downs)
    assert outs and all(type(m) is nn.Linear and m.weight.dtype == torch.float32 for m in outs)
    assert kept.weight_scheme.label == "GGUF Q4_0, Q4_1, Q5_0, Q8_0 blocks; Q5_1 dequantised to float32"
    prepare_for_cpu(kept)
    assert all(m.form == "bf16 copy" and m.weight.untyped_storage().nbytes() == 0 for m in downs)
    floats = load_model(path, dtype="float32").model
    assert parameter_count(kept) == parameter_count(floats)
    prompt = list(range(5, 30))
    kv, state = make_pools(kept, dtype=kept.dtype)
    x = run_engine(kept, [Req(prompt, [25], steps=2)], kv_pool=kv, state_pool=state)[0].logits[0].float()
    y = run_engine(floats, [Req(prompt, [25], steps=2)])[0].logits[0]
    assert (x - y).abs().max() <= 3e-2 * y.abs().max()


def test_why_auto_dequantises_a_gguf_file_is_said(gguf_file):
    from bringup.core.engine.loader import blocks_not_kept, checkpoint_quantization
    from bringup.core.layermap.quantization import read_quantization

    config = read_gguf_config(gguf_file)
    quant = read_quantization(config)
    assert blocks_not_kept(config, quant, "cpu") == "" and checkpoint_quantization(config, "auto", "cpu")[1]
    assert "on the CPU only, not on cuda" in blocks_not_kept(config, quant, "cuda")
    gemma2 = {**config, "model_type": "gemma2"}
    assert blocks_not_kept(gemma2, quant, "cpu").startswith("gemma2's layers do not take blocks yet (")
    assert not checkpoint_quantization(gemma2, "auto", "cpu")[1]
    q5 = {**config, "gguf": {**config["gguf"], "tensor_types": {n: "Q5_1" for n in config["gguf"]["tensor_types"]}}}
    assert blocks_not_kept(q5, read_quantization(q5), "cpu").startswith("its commonest type, Q5_1, has no product")
