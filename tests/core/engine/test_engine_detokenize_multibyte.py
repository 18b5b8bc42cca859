"""Streaming detokenisation with characters split over several tokens: a byte-level BPE (the tiny
GGUF tokenizer, as SmolLM2's and Qwen's work) spells an emoji or a CJK character as up to four
byte tokens, each of which decodes alone to U+FFFD. A stream must hold such pieces back until
the character is whole: no replacement character ever reaches the client, and the pieces join to
the full text."""

from __future__ import annotations

import pytest
from gguf_helpers import byte_level_vocab, tiny_llama, write_gguf

from bringup.core.engine.detokenize import IncrementalDetokenizer
from bringup.core.engine.loader import load_tokenizer

pytest.importorskip("gguf")
TEXTS = [
    "Paris 🙂 café 日本語 ok 👩‍💻!",
    "🙂🙂🙂",  # characters back to back, no ASCII in between
    "naïve façade — “quoted” ½ ℃",
    "末尾は絵文字🎉",  # ends on a multi-byte character
]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    tokens, merges = byte_level_vocab()
    path = write_gguf(tiny_llama(len(tokens)), tmp_path_factory.mktemp("detok") / "tiny.gguf", tokens, merges)
    return load_tokenizer(path)


def stream(tokenizer, prompt: str, text: str, stop=()):
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    detok = IncrementalDetokenizer(tokenizer, tokenizer(prompt, add_special_tokens=False)["input_ids"], stop)
    pieces = []
    for token in ids:
        stopped = detok.add(token)
        pieces.append(detok.take())
        if stopped:
            break
    pieces.append(detok.take(final=True))
    return ids, pieces


@pytest.mark.parametrize("text", TEXTS)
def test_no_piece_shows_a_replacement_character(tokenizer, text):
    ids, pieces = stream(tokenizer, "Q: ", text)
    alone = [tokenizer.decode([t]) for t in ids]
    assert sum("\ufffd" in a for a in alone) >= 2, "the text must really split characters over tokens"
    assert not any("\ufffd" in p for p in pieces), pieces
    assert "".join(pieces) == text


def test_a_prompt_ending_inside_the_context_window_with_multibyte_text(tokenizer):
    # The detokenizer keeps five prompt tokens as left context; here they are byte tokens of emoji.
    ids, pieces = stream(tokenizer, "Q: 🙂🙂", " 日本 ok")
    assert not any("\ufffd" in p for p in pieces)
    assert "".join(pieces) == " 日本 ok"


def test_an_unfinished_character_is_held_until_the_end_then_flushed(tokenizer):
    ids = tokenizer("ok 🙂 x", add_special_tokens=False)["input_ids"]
    cut = ids[:-3]  # the emoji's last byte never comes (the request hit max_tokens)
    detok = IncrementalDetokenizer(tokenizer, [], ())
    pieces = []
    for token in cut:
        detok.add(token)
        pieces.append(detok.take())
    assert not any("\ufffd" in p for p in pieces)  # never while the character could still complete
    pieces.append(detok.take(final=True))
    # Once the request has ended the answer is what its tokens decode to, as transformers gives it.
    assert "".join(pieces) == tokenizer.decode(cut, skip_special_tokens=True)
    assert pieces[-1].endswith("\ufffd") and detok.take(final=True) == ""


def test_a_stop_string_after_multibyte_text(tokenizer):
    _, pieces = stream(tokenizer, "", "日本 END more", stop=("END",))
    assert "".join(pieces) == "日本 "
    assert not any("\ufffd" in p for p in pieces)
