"""Literal text a pattern cannot match without, so most lines skip its regex.

Taken from the parsed regex: the longest run of plain characters at the top level of each
alternative. A pattern whose alternative has no such run (or anything unusual) gets no needles and
is always run.
"""

from __future__ import annotations

try:  # Python 3.11+
    from re import _parser as sre_parse  # type: ignore[attr-defined]
    from re import _constants as sre_constants  # type: ignore[attr-defined]
except ImportError:  # Python 3.10
    import sre_constants  # type: ignore[no-redef]
    import sre_parse  # type: ignore[no-redef]

MIN_NEEDLE = 4


def _longest_literal(items) -> str:
    best, run = "", []
    for op, arg in items:
        if op is sre_constants.LITERAL:
            run.append(chr(arg))
            continue
        if op is sre_constants.SUBPATTERN:  # a group: its own literal run may be longer
            inner = _longest_literal(arg[-1])
            best = max(best, inner, key=len)
        best = max(best, "".join(run), key=len)
        run = []
    return max(best, "".join(run), key=len)


def needles(regex: str) -> tuple[str, ...] | None:
    """Strings of which a matching line contains at least one; None when none can be told."""
    try:
        parsed = sre_parse.parse(regex)
    except Exception:
        return None
    items = list(parsed)
    if len(items) == 1 and items[0][0] is sre_constants.BRANCH:
        alternatives = items[0][1][1]
    else:
        alternatives = [items]
    found = []
    for alternative in alternatives:
        literal = _longest_literal(list(alternative))
        if len(literal) < MIN_NEEDLE:
            return None
        found.append(literal)
    return tuple(found)
