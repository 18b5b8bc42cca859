"""The shape of one catalogue entry: a regular expression over one log line, and what to say."""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Pattern:
    code: str
    engine: str  # sglang | bringup | torch | transformers | triton | system
    severity: str  # error | warning | info
    regex: str  # searched in each line; named groups feed the texts below
    title: str
    explanation: str  # str.format with the named groups (and log facts such as {device})
    fix: str
    source: str = ""
    # "layer": a layer-index error; the regex has groups `layer` and `valid` (a list of ids).
    kind: str = ""
    # For a layer-index pattern whose message has no list of valid ids: the pool it asked ("state"
    # or "kv"); the model's layers of that kind are then the valid ones.
    pool: str = ""
    # A regex that must occur in the lines just before the match (the traceback above it).
    near: str = ""
    # (regex over the log before the match, sentence added to the fix): advice that depends on
    # which backend raised it or which device the log ran on.
    hints: tuple[tuple[str, str], ...] = ()
    # Codes of findings this one makes redundant when both are seen (e.g. a generic ValueError).
    supersedes: tuple[str, ...] = ()
    # The releases whose source prints this message ("0.5.22 and later"), and (regex over the
    # matched line, releases) pairs for texts whose wording tells the release apart; "" unknown.
    versions: str = ""
    versions_by: tuple[tuple[str, str], ...] = ()
    # A fragment of the message as it stands on one line of SGLang's source: the maintainer script
    # looks it up in every release (SglangProfile.messages), which labels `versions` when not given.
    source_text: str = ""
    compiled: re.Pattern = field(init=False, repr=False, compare=False)
    needles: tuple[str, ...] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        from .needles import needles

        object.__setattr__(self, "compiled", re.compile(self.regex))
        object.__setattr__(self, "needles", needles(self.regex))

    def printed_by(self, line: str) -> str:
        """The releases that print this line, as far as the profiles know."""
        return next((v for regex, v in self.versions_by if re.search(regex, line)), self.versions)

    def search(self, line: str) -> re.Match | None:
        """The match in one line (the needles first: most lines lack them)."""
        if self.needles is not None and not any(n in line for n in self.needles):
            return None
        return self.compiled.search(line)
