"""OpenAI's logprobs on our server: the two response shapes (the request fields: protocol.py).

Completions ask with an integer `logprobs` (the number of top alternatives, 0 = the chosen token's
only) and answer `{tokens, token_logprobs, top_logprobs, text_offset}`; chat asks with
`logprobs: true` and `top_logprobs: N` and answers `{content: [{token, logprob, bytes, top_logprobs}]}`.
The numbers come from the engine (core/engine/logprobs.py: float32 log_softmax of the logits the
sampler read, before temperature and top-k/top-p). Tokens are shown as their own decoded text.
"""

from __future__ import annotations


class Pieces:
    """Token id -> its own decoded text, cached (the top alternatives repeat from token to token)."""

    def __init__(self, tokenizer):
        self.tokenizer, self._cache = tokenizer, {}

    def __call__(self, ids) -> list[str]:
        missing = [i for i in dict.fromkeys(ids) if i not in self._cache]
        if missing:
            for i, text in zip(missing, self.tokenizer.batch_decode([[i] for i in missing])):
                self._cache[i] = text
        return [self._cache[i] for i in ids]


def completion_block(entries, pieces: Pieces, offset: int) -> tuple[dict, int]:
    """The completions `logprobs` object of these tokens; text_offset counts characters of the
    tokens' own texts from `offset` (where the previous chunk's tokens ended). Returns the next offset."""
    tokens, offsets, tops = [], [], []
    for e in entries:
        [piece] = pieces([e.token])
        tokens.append(piece)
        offsets.append(offset)
        offset += len(piece)
        top: dict[str, float] = {}
        for text, (_, value) in zip(pieces([i for i, _ in e.top]), e.top):
            top.setdefault(text, value)  # two ids with one text: the likelier one's number
        tops.append(top)
    return {"tokens": tokens, "token_logprobs": [e.logprob for e in entries], "top_logprobs": tops,
            "text_offset": offsets}, offset


def _entry(piece: str, logprob: float) -> dict:
    return {"token": piece, "logprob": logprob, "bytes": list(piece.encode("utf-8"))}


def chat_block(entries, pieces: Pieces) -> dict:
    """The chat `logprobs` object of these tokens."""
    content = []
    for e in entries:
        [piece] = pieces([e.token])
        top = [_entry(t, v) for t, (_, v) in zip(pieces([i for i, _ in e.top]), e.top)]
        content.append({**_entry(piece, e.logprob), "top_logprobs": top})
    return {"content": content}
