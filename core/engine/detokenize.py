"""Incremental detokenization and stop strings.

Decoding one token alone loses the spaces and multi-byte characters that depend on its
neighbours, so (like vLLM) we decode a short window twice, the tokens already shown and the same
plus the new ones, and emit the difference once it no longer ends in a partial character. Text
that could be the start of a stop string is held back until it is known not to be one, so a
stream never shows a stop string; the stop string itself is trimmed from the output.

A byte-level vocabulary spells an emoji or a CJK character as several byte tokens, each decoding
alone to U+FFFD: those are held back while the character may still complete, so a stream never
shows a replacement character for an unfinished piece. When the request ends (`take(final=True)`)
what is still held is flushed as it decodes, so the whole answer always equals decode(output ids),
as transformers and SGLang give it (bytes that never formed a character then show as U+FFFD).
"""

from __future__ import annotations

_PROMPT_CONTEXT = 5  # prompt tokens kept as left context for the first output tokens


class IncrementalDetokenizer:
    def __init__(self, tokenizer, prompt_ids, stop=()):
        self.tokenizer = tokenizer
        self.ids = [int(t) for t in list(prompt_ids)[-_PROMPT_CONTEXT:]]
        self.prefix_offset = 0
        self.read_offset = len(self.ids)
        self.stop = tuple(stop)
        self.hold = max((len(s) for s in self.stop), default=1) - 1
        self.text = ""  # output text so far (stop string trimmed once found)
        self.sent = 0  # characters of `text` already handed out
        self.stopped_by: str | None = None

    def _decode(self, ids) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)

    def add(self, token_id: int) -> bool:
        """Append one output token; True when a stop string has appeared (text trimmed before it)."""
        if self.stopped_by is not None:
            return True
        self.ids.append(int(token_id))
        prefix = self._decode(self.ids[self.prefix_offset:self.read_offset])
        full = self._decode(self.ids[self.prefix_offset:])
        if len(full) <= len(prefix) or full.endswith("\ufffd"):
            return False  # a partial character, or a token that adds no text (yet)
        old_len = len(self.text)
        self.text += full[len(prefix):]
        self.prefix_offset, self.read_offset = self.read_offset, len(self.ids)
        return self._find_stop(old_len)

    def _find_stop(self, old_len: int) -> bool:
        best = None
        for s in self.stop:
            pos = self.text.find(s, max(0, old_len - len(s) + 1))
            if pos >= 0 and (best is None or pos < best[0]):
                best = (pos, s)
        if best is None:
            return False
        self.text = self.text[: best[0]]
        self.sent = min(self.sent, len(self.text))
        self.stopped_by = best[1]
        return True

    def _flush(self) -> None:
        """At the end: the held-back tail of tokens (an unfinished character) as it decodes."""
        if self.stopped_by is not None or self.read_offset >= len(self.ids):
            return
        prefix = self._decode(self.ids[self.prefix_offset:self.read_offset])
        full = self._decode(self.ids[self.prefix_offset:])
        if len(full) > len(prefix):
            old_len = len(self.text)
            self.text += full[len(prefix):]
            self._find_stop(old_len)
        self.prefix_offset = self.read_offset = len(self.ids)

    def take(self, final: bool = False) -> str:
        """New text to hand out; holds back a possible stop-string prefix (and an unfinished
        character) unless `final`."""
        if final:
            self._flush()
        end = len(self.text) if final or self.stopped_by else max(self.sent, len(self.text) - self.hold)
        out = self.text[self.sent:end]
        self.sent = end
        return out
