"""Which lines of a log hold any of some literal strings, found with C-speed str.find over the
whole text rather than a regular expression per line: most log lines are chatter, and this is what
keeps a 100 MB log within seconds."""

from __future__ import annotations

import bisect


class LineIndex:
    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.text = "\n".join(lines)
        self.starts: list[int] = []
        offset = 0
        for line in lines:
            self.starts.append(offset)
            offset += len(line) + 1

    CHUNK = 1 << 19  # characters searched together: a slice that stays in the CPU's cache for every needle

    def many(self, wanted: dict) -> dict:
        """{key: sorted line indices} for {key: needles}, every needle searched chunk by chunk, so a big
        log is read from memory once rather than once per needle (which is what kept 10 MB from being
        ten times 1 MB)."""
        text, starts = self.text, self.starts
        hits: dict = {key: set() for key in wanted}
        pairs = [(key, n) for key, ns in wanted.items() for n in ns]
        begin = 0
        while begin < len(text):
            end = min(len(text), begin + self.CHUNK)
            nl = text.find("\n", end)
            end = len(text) if nl == -1 else nl + 1  # chunks end at line ends
            for key, needle in pairs:
                lead = 1 if needle.startswith("\n") else 0
                pos = text.find(needle, begin, end + len(needle))
                while pos != -1 and pos < end:
                    line = bisect.bisect_right(starts, pos + lead) - 1
                    hits[key].add(line)
                    nxt = starts[line + 1] if line + 1 < len(starts) else len(text)
                    pos = text.find(needle, nxt, end + len(needle))
            begin = end
        return {key: sorted(v) for key, v in hits.items()}

    def lines_with(self, needles) -> list[int]:
        """Sorted 0-based indices of the lines holding at least one needle."""
        hits: set[int] = set()
        text, starts = self.text, self.starts
        for needle in needles:
            lead = 1 if needle.startswith("\n") else 0  # "\n'": a line that starts with a quote
            pos = text.find(needle)
            while pos != -1:
                line = bisect.bisect_right(starts, pos + lead) - 1
                hits.add(line)
                nxt = starts[line + 1] if line + 1 < len(starts) else len(text)
                pos = text.find(needle, nxt)
        return sorted(hits)

    def first_line(self, needles, accept, stop: int | None = None) -> int | None:
        """The first line (0-based, before `stop`) holding a needle for which accept(line_text) is true;
        each needle's occurrences are walked lazily, so a needle on every line costs one find."""
        text, starts = self.text, self.starts
        limit = len(text) if stop is None or stop >= len(starts) else starts[stop]
        best: int | None = None
        for needle in needles:
            lead = 1 if needle.startswith("\n") else 0
            pos = text.find(needle, 0, limit)
            while pos != -1:
                line = bisect.bisect_right(starts, pos + lead) - 1
                if best is not None and line >= best:
                    break
                if accept(self.lines[line]):
                    best = line
                    break
                nxt = starts[line + 1] if line + 1 < len(starts) else len(text)
                pos = text.find(needle, nxt, limit)
        return best
