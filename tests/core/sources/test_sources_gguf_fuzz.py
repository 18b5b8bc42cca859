"""Fuzzed GGUF files: metadata values replaced, retyped or left out, and headers cut short or
with bytes changed. Every file either loads (config, layer map and every weight) or is refused
before loading with a message that names what is wrong; none ends in a traceback, none shows numpy's
internals, and only a file the sizes show to be cut short is blamed on the download."""

from __future__ import annotations

import re

import pytest
from gguf_fuzz_helpers import DROP, SIZES, TOKEN_IDS, write_small_gguf
from hypothesis import HealthCheck, given, settings, strategies as st

from bringup.core.errors import UserError
from bringup.core.families import build_layer_map
from bringup.core.sources import gguf_file

pytest.importorskip("gguf")

NUMPY_WORDS = re.compile(r"reshape|dtype|ndarray|np\.|numpy|memmap|buffer|axis \d")
KEYS = [f"llama.{k}" for k in SIZES] + [f"tokenizer.ggml.{k}" for k in TOKEN_IDS]
junk = st.one_of(st.just(DROP), st.integers(-3, 2 ** 33), st.sampled_from([0, 1, 3, 5, 7, 64, 1000]),
                 st.floats(allow_nan=True, allow_infinity=True, width=32), st.text(max_size=6), st.booleans(),
                 st.lists(st.integers(0, 9), min_size=1, max_size=3))


def loads_or_refused(path, *, before_loading: bool = True) -> UserError | None:
    """Load the file as the engine would (config, map, every weight); the refusal, or None when it loads."""
    try:
        config = gguf_file.read_gguf_config(path)
        layer_map = build_layer_map(config, name="fuzzed")  # inspect and validate read the file so
    except UserError as err:
        return err
    assert layer_map.num_layers == config["num_hidden_layers"]
    names = [name for name, _ in gguf_file.iter_gguf_weights(path, config)]
    assert len(names) == len(set(names)) > 0
    return None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=st.dictionaries(st.sampled_from(KEYS), junk, min_size=1, max_size=3))
def test_fuzzed_metadata_loads_or_is_refused_naming_the_key(changes, tmp_path_factory):
    path = write_small_gguf(tmp_path_factory.mktemp("meta") / "fuzzed.gguf", changes)
    err = loads_or_refused(path)
    if err is None:
        return
    text = str(err)
    assert not NUMPY_WORDS.search(text), text
    assert "download" not in text, text  # the sizes are whole: nothing to blame on a download
    assert "GGUF metadata" in text or "GGUF tensor" in text, text
    if "GGUF metadata" in text:
        assert any(key in text for key in KEYS) and "expected" in text, text


@pytest.fixture(scope="module")
def whole_file(tmp_path_factory):
    return write_small_gguf(tmp_path_factory.mktemp("whole") / "whole.gguf")  # a path: hypothesis prints it on failure


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_cut_or_damaged_header_is_refused_with_what_is_wrong(data, whole_file, tmp_path_factory):
    whole = whole_file.read_bytes()
    raw = bytearray(whole)
    cut = data.draw(st.booleans(), label="cut")
    if cut:
        raw = raw[: data.draw(st.integers(0, len(raw) - 1), label="length")]
    else:
        header_end = whole.index(b"blk.1.ffn_down.weight") + 64  # past the last tensor info
        for pos, byte in data.draw(st.lists(st.tuples(st.integers(0, header_end), st.integers(0, 255)),
                                            min_size=1, max_size=4), label="flips"):
            raw[pos] = byte
    path = tmp_path_factory.mktemp("header") / "damaged.gguf"
    path.write_bytes(bytes(raw))
    err = loads_or_refused(path)
    if err is None:
        assert not cut  # a cut file never reads as whole
        return
    text = str(err)
    assert not NUMPY_WORDS.search(text), text
    if cut and len(raw) >= 4:
        assert "incomplete" in text, text


def test_the_cases_that_gave_tracebacks_name_their_key(tmp_path):
    """Head count 0, a text embedding length, head count 3 (the fuzz runs of issue 34)."""
    cases = {"llama.attention.head_count": (0, "a whole number of at least 1"),
             "llama.embedding_length": ("32", "expected a whole number"),
             "llama.attention.head_count_kv": (3, "expected a divisor of 4")}
    for key, (value, expected) in cases.items():
        with pytest.raises(UserError, match=re.escape(key) + ".*" + re.escape(expected)):
            gguf_file.read_gguf_config(write_small_gguf(tmp_path / f"{key}.gguf", {key: value}))
    with pytest.raises(UserError, match=r"GGUF tensor blk\.0\.attn_q\.weight has shape \[32, 32\].*\[24, 32\]"):
        gguf_file.read_gguf_config(write_small_gguf(tmp_path / "h3.gguf", {"llama.attention.head_count": 3,
                                                                          "llama.attention.head_count_kv": 1}))


def test_only_a_file_cut_short_is_blamed_on_the_download(tmp_path):
    whole = write_small_gguf(tmp_path / "w.gguf").read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(whole[: len(whole) - 1000])
    with pytest.raises(UserError, match=r"ending at byte \d+, but the file has only \d+ bytes.*incomplete"):
        gguf_file.read_gguf_config(cut)
    page = tmp_path / "page.gguf"
    page.write_bytes(b"<!DOCTYPE html><html>rate limited</html>")
    with pytest.raises(UserError, match="not a GGUF file") as info:
        gguf_file.read_gguf_config(page)
    assert "web page" in str(info.value) and "incomplete" not in str(info.value)


def test_a_text_value_that_is_not_utf8_is_refused_with_its_key(tmp_path):
    """A flipped byte inside a string value (found by the fuzz above): gguf decodes it lazily, as
    UnicodeDecodeError, which must reach the user as the damaged key."""
    raw = bytearray(write_small_gguf(tmp_path / "whole.gguf").read_bytes())
    at = raw.index(b"llama", raw.index(b"general.architecture"))
    raw[at] = 0x80
    damaged = tmp_path / "damaged.gguf"
    damaged.write_bytes(bytes(raw))
    with pytest.raises(UserError, match=r"general\.architecture holds text that is not UTF-8"):
        gguf_file.read_gguf_config(damaged)
