"""GGUF files as a source: tiny random Llama and Qwen3 checkpoints written as GGUF (quantised the
way llama.cpp writes them), read back by our loader and compared with transformers loading the
same file: config, tokenizer, dequantised weights, and the engine's logits and greedy tokens."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
import torch
from gguf_helpers import CHAT_TEMPLATE, byte_level_vocab, tiny_llama, write_gguf
from models_helpers import DEVICE, Req, assert_matches_hf, run_engine, standard_requests

from bringup.core.engine.loader import load_model, load_tokenizer, resolve_checkpoint
from bringup.core.errors import UserError
from bringup.core.sources import gguf_file
from bringup.core.sources.resolve import layer_map_of, load_config

transformers = pytest.importorskip("transformers")
pytest.importorskip("gguf")


@pytest.fixture(scope="module")
def vocab():
    return byte_level_vocab()


@pytest.fixture(scope="module", params=["llama", "qwen3"])
def files(request, vocab, tmp_path_factory):
    """(transformers model, exact F32 file, quantised file) for one architecture."""
    tokens, merges = vocab
    tied = request.param == "qwen3"  # Qwen3's small models tie; the Llama keeps its own lm_head
    # transformers' GGUF reader takes Qwen3's head_dim from its config default (128), not the file.
    extra = {"head_dim": 128} if request.param == "qwen3" else {}
    hf = tiny_llama(len(tokens), model_type=request.param, tie_word_embeddings=tied, **extra)
    folder = tmp_path_factory.mktemp(f"gguf_{request.param}")
    exact = write_gguf(hf, folder / "tiny-f32.gguf", tokens, merges, quant="f32")
    quantised = write_gguf(hf, folder / "tiny-q.gguf", tokens, merges)
    return hf, exact, quantised


def test_an_f32_file_gives_back_the_checkpoint_exactly(files):
    # For the llama architecture this proves the q/k permutation is undone; for qwen3 that none is applied.
    hf, exact, _ = files
    state = hf.state_dict()
    names = set()
    for name, tensor in gguf_file.iter_gguf_weights(exact):
        assert torch.equal(tensor, state[name]), name
        names.add(name)
    expected = set(state) - ({"lm_head.weight"} if hf.config.tie_word_embeddings else set())
    assert names == expected


@pytest.fixture(scope="module")
def reference(files):
    """transformers' own model loaded from the quantised file (its GGUF path needs accelerate)."""
    pytest.importorskip("accelerate")
    _, _, quantised = files
    return transformers.AutoModelForCausalLM.from_pretrained(str(quantised.parent), gguf_file=quantised.name,
                                                             dtype=torch.float32).eval()


def test_dequantised_weights_equal_transformers_reading_of_the_same_file(files, reference):
    _, _, quantised = files
    state = reference.state_dict()
    for name, tensor in gguf_file.iter_gguf_weights(quantised):
        assert torch.equal(tensor, state[name]), name


def test_config_from_metadata_agrees_with_transformers(files):
    hf, _, quantised = files
    config = gguf_file.read_gguf_config(quantised)
    want = hf.config
    for key in ("num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads",
                "num_key_value_heads", "head_dim", "vocab_size", "tie_word_embeddings"):
        assert config[key] == getattr(want, key), key
    assert config["model_type"] == want.model_type
    assert config["rms_norm_eps"] == pytest.approx(want.rms_norm_eps, rel=1e-6)
    assert config["gguf"]["quantisation"].startswith(("Q", "F"))
    assert "Q4_0" in config["gguf"]["quantisation"] and "Q8_0" in config["gguf"]["quantisation"]


def test_engine_matches_transformers_loading_the_same_gguf(files, reference):
    _, _, quantised = files
    ref = reference
    model = load_model(quantised, device=DEVICE, dtype="float32").model
    vocab = ref.config.vocab_size
    assert_matches_hf(ref, run_engine(model, standard_requests(vocab)))  # batched, chunked, staggered
    prompt = torch.randint(3, vocab, (9,), generator=torch.Generator().manual_seed(3)).tolist()
    assert_matches_hf(ref, run_engine(model, [Req(prompt, [2, 7], steps=5)]))  # one request alone


def test_tokenizer_and_chat_template_come_from_the_file(files):
    _, _, quantised = files
    ours = load_tokenizer(quantised)
    theirs = transformers.AutoTokenizer.from_pretrained(str(quantised.parent), gguf_file=quantised.name)
    text = "The state pool holds one slot per request."
    assert ours(text)["input_ids"] == theirs(text)["input_ids"]
    assert ours.decode(ours(text)["input_ids"]) == text
    assert ours.chat_template == CHAT_TEMPLATE
    ids = ours.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=True)
    ids = ids["input_ids"] if hasattr(ids, "keys") else ids
    assert ours.decode(ids) == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert ours.eos_token == "<|im_end|>"


def test_inspect_and_plan_read_the_metadata_like_a_config(files):
    hf, _, quantised = files
    loaded = load_config(str(quantised))
    assert loaded.kind == "gguf" and loaded.name == "tiny-q" and loaded.path is None
    layer_map = layer_map_of(loaded)
    assert layer_map.num_layers == 2 and layer_map.full_attention_layers == [0, 1]
    assert layer_map.params_total == sum(p.numel() for p in hf.parameters())
    assert any("GGUF file" in note for note in layer_map.notes)
    assert resolve_checkpoint(str(quantised)) == quantised


def test_the_plan_counts_gguf_blocks_where_the_engine_keeps_them_and_the_model_dtype_where_it_dequantises(files):
    from bringup.core.planner.plan import plan_memory

    layer_map = layer_map_of(load_config(str(files[2])))
    kept, gpu = (plan_memory(layer_map, device_memory=8 * 2**30, device=d, dtype="auto") for d in ("cpu", "cuda"))
    assert gpu.weights_bytes == layer_map.params_total * 4  # float32, as the engine loads it there
    assert kept.weights_bytes < gpu.weights_bytes / 2  # the blocks' own bits
    assert any("dequantises the GGUF blocks at load: the engine multiplies GGUF blocks on the CPU only, not on cuda"
               in n for n in gpu.notes)
    sglang = plan_memory(layer_map, device_memory=8 * 2**30, device="cuda", dtype="auto", target="sglang")
    assert sglang.weights_bytes == kept.weights_bytes  # another engine's rules are its own


def test_a_truncated_file_is_a_clear_error(files, tmp_path):
    _, _, quantised = files
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(quantised.read_bytes()[:2000])
    with pytest.raises(UserError, match="not a readable GGUF file.*fetch it again"):
        gguf_file.read_gguf_config(cut)


def test_an_unsupported_architecture_names_what_is_supported(tmp_path):
    import gguf

    path = tmp_path / "rwkv.gguf"
    writer = gguf.GGUFWriter(str(path), "rwkv6")
    writer.add_block_count(1)
    writer.add_tensor("token_embd.weight", torch.zeros(4, 8).numpy())
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(UserError, match="'rwkv6' is not supported.*llama"):
        load_config(str(path))


def test_gguf_is_recognised_by_suffix_or_magic(tmp_path):
    plain = tmp_path / "model.bin"
    plain.write_bytes(b"GGUF" + struct.pack("<I", 3))
    assert gguf_file.is_gguf_path(plain)
    assert gguf_file.is_gguf_path(tmp_path / "missing.GGUF")
    other = tmp_path / "config.json"
    other.write_text("{}")
    assert not gguf_file.is_gguf_path(other)


def test_unpermute_inverts_llama_cpp_permute():
    from gguf_helpers import permute

    w = torch.randn(4 * 2 * 6, 5).numpy()
    assert (gguf_file.unpermute_qk(permute(w, 4), 4) == w).all()
    assert not (permute(w, 4) == w).all()


def test_run_tab_and_launch_commands_serve_the_file_itself(files):
    from bringup.app.run.serve_source import serve_source_for
    from bringup.core.launch import model_path
    from bringup.core.sources.resolve import load_layer_map

    _, _, quantised = files
    layer_map = load_layer_map(str(quantised))
    assert serve_source_for(layer_map) == str(quantised)  # not "default": the file holds weights
    assert model_path(layer_map) == str(quantised)  # SGLang and vLLM take a GGUF path too


def test_a_rope_freqs_tensor_is_named_as_not_applied(files, tmp_path):
    import gguf

    _, exact, _ = files
    reader = gguf_file.reader_for(exact)
    path = tmp_path / "with-rope-freqs.gguf"
    writer = gguf.GGUFWriter(str(path), gguf_file._value(reader, "general.architecture"))
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        kind = field.types[0]
        if kind == gguf.GGUFValueType.ARRAY:
            writer.add_array(key, field.contents())
        else:
            writer.add_key_value(key, field.contents(), kind)
    for t in reader.tensors:
        writer.add_tensor(t.name, gguf_file.dequantised(t).astype("float32"))
    writer.add_tensor("rope_freqs.weight", torch.ones(8).numpy())
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    loaded = load_config(str(path))
    assert any("rope_freqs" in note and "not applied" in note for note in loaded.notes)
    assert not any("rope_freqs" in note for note in load_config(str(exact)).notes)


def _file_backed_resident_bytes() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("RssFile:"))


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads Linux's /proc")
def test_loading_weights_leaves_the_file_s_pages_unmapped(files, vocab, tmp_path):
    """The reader maps the whole file; reading each tensor through that map kept every page of it in
    the process's resident memory until the reader went (SmolLM2: 98 MiB at the load's peak)."""
    hf_small, exact, _ = files
    if hf_small.config.model_type != "llama":
        pytest.skip("one architecture is enough: the reading is the same")
    for _ in gguf_file.iter_gguf_weights(exact):  # the code the walk runs, loaded before the count
        pass
    tokens, merges = vocab
    hf = tiny_llama(len(tokens), hidden_size=512, intermediate_size=2048, num_hidden_layers=1, num_attention_heads=8,
                    num_key_value_heads=8, head_dim=64)
    big = write_gguf(hf, tmp_path / "big-f32.gguf", tokens, merges, quant="f32")  # 17 MiB of float32 tensors
    gguf_file.reader_for(big)
    before = _file_backed_resident_bytes()
    names = [name for name, _ in gguf_file.iter_gguf_weights(big)]
    grown = _file_backed_resident_bytes() - before
    assert len(names) == len(hf.state_dict()) and big.stat().st_size > 16 << 20
    assert grown < big.stat().st_size // 4, grown


def test_no_parsed_reader_lives_while_the_weights_are_read(files):
    """The reader's fields hold the tokenizer arrays as numpy objects (160 MiB for SmolLM2's 49k
    tokens and merges): a load holds only the tensors' places while the weights come."""
    import gc

    from gguf import GGUFReader

    _, _, quantised = files
    gguf_file.reader_for(quantised)  # parsed, as the config's read leaves it
    weights = gguf_file.iter_gguf_weights(quantised)
    next(weights)
    gc.collect()
    assert not [o for o in gc.get_objects() if type(o) is GGUFReader]
    assert len(list(weights)) > 0
