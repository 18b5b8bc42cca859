"""Read a log (SGLang's, our engine's, a traceback) and name the failures in it.

Every catalogue pattern is tried on every line; a pattern with `near` also needs its context in
the lines just above (the traceback). The same failure printed by several ranks or re-raised by
the launcher becomes one finding with all its line numbers. An exception no pattern knows still
becomes an UNRECOGNIZED_ERROR finding, so a log never comes back empty-handed.
"""

from __future__ import annotations

import bisect
import re
import string
from dataclasses import replace

from bringup.core.finding import Finding
from bringup.core.layermap.vocabulary import LayerMap

from .all_patterns import PATTERNS
from .capacity import state_cap
from .facts import facts_text, read_facts
from .layer_mentions import layers_named
from .layers import layer_context
from .general_finding import fit_advice_to_engine, general_finding
from .line_index import LineIndex
from .prefixes import strip_all
from .reading import read_log_lines
from .pattern import Pattern
from .result import Diagnosis
from .wrappers import SEE_ABOVE

NEAR_LINES = 40  # how far above a match its traceback context may be
HINT_LINES = 200  # how far above a match hints (backend file, device) are looked for
MAX_MATCHED = 400  # characters of the matched line kept in a finding
MAX_ID_DIGITS = 7  # a longer "layer id" is not one (and int() of 5,000 digits raises)

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_EXCEPTION = re.compile(r"^(?:\[[^\]]*\]\s*)?(?P<exc>(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception))(?::\s*(?P<msg>.*))?$")
# Process exits and signals are their own findings elsewhere (`failure`), not unrecognised errors.
_EXITS = re.compile(r"exited with code|Received sigquit")


class _Safe(dict):
    def __missing__(self, key: str) -> str:
        return "?"


_OPTIONAL = re.compile(r"\[\[(.*?)\]\]")
_FIELD = re.compile(r"\{(\w+)\}")


def _format(template: str, values: dict) -> str:
    """str.format that leaves '?' for unknown fields and drops [[optional parts]] whose fields are empty."""

    def optional(match: re.Match) -> str:
        part = match.group(1)
        return part if all(values.get(name) for name in _FIELD.findall(part)) else ""

    return string.Formatter().vformat(_OPTIONAL.sub(optional, template), (), _Safe(values))


def _ids(text: str) -> list[int]:
    return [int(x) for x in re.findall(r"\d+", text or "") if len(x) <= MAX_ID_DIGITS]


class _HintLines:
    """Where each hint regex matches in the log, found once per diagnosis (candidate lines by needle),
    so "does it occur in the 200 lines above this match" is a bisect, not a regex over 200 lines per finding."""

    def __init__(self, lines: list[str], index, facts: dict) -> None:
        self.lines, self.index, self.facts_text, self.at = lines, index, facts_text(facts), {}

    def near(self, regex: str, line_no: int) -> bool:
        if re.search(regex, self.facts_text):
            return True
        if regex not in self.at:
            from .needles import needles

            words = needles(regex)
            rows = self.index.lines_with(words) if words else range(len(self.lines))
            self.at[regex] = [i for i in rows if re.search(regex, self.lines[i])]
        hits = self.at[regex]
        k = bisect.bisect_left(hits, max(0, line_no - HINT_LINES))
        return k < len(hits) and hits[k] <= line_no


def _hints(pattern: Pattern, before) -> str:
    if isinstance(before, tuple):  # (_HintLines, line_no)
        where, line_no = before
        extra = [sentence for regex, sentence in pattern.hints if where.near(regex, line_no)]
        return (" " + " ".join(extra)) if extra else ""
    extra = [sentence for regex, sentence in pattern.hints if re.search(regex, before)]
    return (" " + " ".join(extra)) if extra else ""


def _finding(pattern: Pattern, match: re.Match, line_no: int, line: str, lines: list[str], facts: dict,
             layer_map: LayerMap | None, last_tb: list[int] | None = None, hint_lines=None) -> Finding:
    groups = {k: (v if v is not None else "") for k, v in match.groupdict().items()}
    values = {**{k: str(v) for k, v in facts.items()}, **groups}
    before = ((hint_lines, line_no) if hint_lines is not None else
              "\n".join(lines[max(0, line_no - HINT_LINES):line_no + 1]) + "\n" + facts_text(facts))
    explanation = _format(pattern.explanation, values)
    fix = _format(pattern.fix, values) + _hints(pattern, before)
    requested = valid = None
    requested_info, valid_infos, layers = None, (), ()
    if pattern.kind == "layer":
        pool = "state" if "state" in (groups.get("pool", "") or pattern.pool) else "kv"
        requested = int(groups["layer"])
        if "valid" in groups:
            valid = _ids(groups["valid"])
        else:  # the message names only the layer (a bare KeyError): the pool holds the model's layers of its kind
            valid = [] if layer_map is None else list(
                layer_map.state_layers if pool == "state" else layer_map.full_attention_layers)
        layers = (requested, *valid)
        if layer_map is not None:
            requested_info, infos, sentence = layer_context(layer_map, requested, valid, pool)
            valid_infos = tuple(infos)
            explanation += sentence
    else:  # the line's own layer ids, else those its traceback names (e.g. get_value_buffer(0) on a PP stage)
        layers = layers_named([line]) or (layers_named(_traceback_block(lines, line_no, last_tb)) if pattern.severity == "error"
                                          else ())
        if layers:
            explanation += (f" The traceback names layer{'s' if len(layers) > 1 else ''} "
                            f"{', '.join(map(str, layers))}, marked on the map.")
    details = {k: v for k, v in groups.items() if v != "" and k not in ("layer", "valid")}
    printed_by = pattern.printed_by(line)
    if printed_by:
        details["printed_by"] = printed_by
        explanation += f" (This wording is printed by sglang {printed_by}.)"
    return Finding(
        kind="log", code=pattern.code, severity=pattern.severity, title=_format(pattern.title, values), explanation=explanation,
        fix=fix, lines=(line_no + 1,), matched=line.strip()[:MAX_MATCHED], engine=pattern.engine,
        source=_format(pattern.source, values), layers=layers, requested_layer=requested,
        valid_layers=tuple(valid) if valid is not None else None, requested=requested_info, valid=valid_infos,
        details=details,
    )


def _unrecognized(match: re.Match, line_no: int, line: str, block: list[str]) -> Finding:
    exc, msg = match["exc"], (match["msg"] or "").strip()
    layers = layers_named(block + [line])
    named = (f" It names layer{'s' if len(layers) > 1 else ''} {', '.join(map(str, layers))}, marked on the map."
             if layers else "")
    return Finding(
        kind="log", code="UNRECOGNIZED_ERROR", severity="error", title=f"{exc}" + (f": {msg[:120]}" if msg else ""),
        explanation="This exception is not in the diagnosis catalogue; it is the last thing the traceback says." + named,
        fix="Read the traceback above it: the innermost frames name the file and the call that failed.",
        lines=(line_no + 1,), matched=line.strip()[:MAX_MATCHED], engine="", details={"exception": exc},
        layers=layers,
    )


def _traceback_block(lines: list[str], i: int, last_tb: list[int] | None = None) -> list[str]:
    """The lines from the nearest `Traceback` header above line i to just before it."""
    if last_tb is not None:
        j = last_tb[i - 1] if i > 0 else -1
        return lines[j:i] if j >= max(0, i - 400) else lines[max(0, i - NEAR_LINES):i]
    start = max(0, i - 400)
    for j in range(i - 1, start - 1, -1):
        if "Traceback (most recent call last)" in lines[j]:
            return lines[j:i]
    return lines[max(0, i - NEAR_LINES):i]


def _last_tracebacks(lines: list[str]) -> list[int]:
    """For each line, the index of the latest `Traceback` header at or above it (-1: none): one pass."""
    out, last = [], -1
    for i, line in enumerate(lines):
        if "Traceback (most recent call last)" in line:
            last = i
        out.append(last)
    return out


def _dedupe_key(f: Finding) -> tuple:
    # Ranks, timestamps, and the assert's source line next to its exception line differ only in
    # framing; the failure (code, title, the values read from it) is the same.
    if f.code == "UNRECOGNIZED_ERROR":
        return f.code, re.sub(r"^\[[^\]]*\]\s*", "", f.matched)
    return f.code, f.title, tuple(sorted(f.details.items())), f.requested_layer, f.valid_layers


class _LineIndex(LineIndex):
    """Finds the lines that hold a pattern's needles with one C-speed search of the whole text,
    so a 100,000-line log costs a few passes of str.find rather than a regex per line and pattern."""

    def candidates(self, pattern: Pattern) -> list[int]:
        if pattern.needles is None:
            return list(range(len(self.lines)))
        if not hasattr(self, "_all"):  # every pattern's needles in one chunked pass
            self._all = self.many({id(p): p.needles for p in PATTERNS if p.needles is not None})
        return self._all[id(pattern)]


def diagnose(text: str, layer_map: LayerMap | None = None, skipped_note: str = "") -> Diagnosis:
    """Findings for a log or traceback; with `layer_map`, layer-index findings say what the layers are.

    Linear in lines and findings: each pattern is tried only on the lines holding its needles, the
    same failure seen again only adds a line number, and "does a catalogue finding explain this
    generic one" is a bisect over sorted line numbers."""
    lines = [strip_all(line) for line in _ANSI.sub("", text).splitlines()]
    facts = read_facts(lines)
    found: dict[tuple, Finding] = {}
    seen_lines: dict[tuple, list[int]] = {}
    covered: set[int] = set()  # lines a catalogue entry explained
    index = _LineIndex(lines)
    last_tb = _last_tracebacks(lines)
    hint_lines = _HintLines(lines, index, facts)
    for pattern in PATTERNS:
        for i in index.candidates(pattern):
            line = lines[i]
            match = pattern.compiled.search(line)
            if not match:
                continue
            if pattern.near and not re.search(pattern.near, "\n".join(lines[max(0, i - NEAR_LINES):i])):
                continue
            if pattern.kind == "layer" and len(match.groupdict().get("layer") or "") > MAX_ID_DIGITS:
                continue  # an absurd id: the general reader reports it
            _add(found, seen_lines, _finding(pattern, match, i, line, lines, facts, layer_map, last_tb, hint_lines))
            covered.add(i)
    for i in index.lines_with(("Error", "Exception")):
        line = lines[i]
        match = _EXCEPTION.match(line.strip())
        if not match or i in covered or SEE_ABOVE.search(line) or _EXITS.search(line):
            continue
        if i == 0 or last_tb[i - 1] < max(0, i - 400):
            continue
        _add(found, seen_lines, _unrecognized(match, i, line, _traceback_block(lines, i, last_tb)))
    findings = [replace(f, lines=tuple(sorted(set(seen_lines[k])))) if len(seen_lines[k]) > 1 else f
                for k, f in found.items()]
    findings.sort(key=lambda f: f.lines[0])
    # A catalogue finding explains the generic ones it names (an "unrecognised" exception, a broader
    # pattern) when both come from the same traceback.
    explainers: dict[str, list[int]] = {}
    for g in findings:
        for code in _supersedes(g.code):
            explainers.setdefault(code, []).extend(g.lines)
    for lst in explainers.values():
        lst.sort()
    findings = [f for f in findings if not _near_any(f.lines[0], explainers.get(f.code, ()), f)]
    reading = read_log_lines(lines, layer_map, index)
    specific = [f for f in findings if f.severity == "error" and f.code != "UNRECOGNIZED_ERROR"]
    on_failure_line = reading.failed and any(reading.failure.line in f.lines for f in findings
                                             if f.code != "UNRECOGNIZED_ERROR")
    if reading.failed and not specific and not on_failure_line:
        general = general_finding(reading, lines)
        findings = [f for f in findings if f.code != "UNRECOGNIZED_ERROR"] + [general]
        findings.sort(key=lambda f: f.lines[0])
    findings = fit_advice_to_engine(findings, reading, lines)
    if reading.absurd:
        findings.append(_absurd(reading))
    cap = state_cap(facts, findings, tuple(layer_map.state_layers) if layer_map is not None else ())
    if cap is not None:
        findings.append(cap)
    if layer_map is not None:
        from .crosscheck import pools_against_plan

        check = pools_against_plan(facts, layer_map, lines)
        if check is not None:
            findings.append(check)
    return Diagnosis(findings=findings, lines_read=len(lines), facts=facts,
                     model=layer_map.name if layer_map is not None else None, reading=reading, note=skipped_note)


def _near_any(line: int, sorted_lines, f: Finding) -> bool:
    if not sorted_lines:
        return False
    k = bisect.bisect_left(sorted_lines, line - NEAR_LINES)
    return k < len(sorted_lines) and abs(sorted_lines[k] - line) <= NEAR_LINES and not (
        len(sorted_lines) == 1 and f.lines == (sorted_lines[0],) and False)


def _absurd(reading) -> Finding:
    r = reading.absurd[0]
    return Finding(
        kind="log", code="ABSURD_LAYER_ID", severity="warning",
        title=f"A layer id of {len(r.digits):,} digits",
        explanation=(f"Line {r.line} names a layer by a number {len(r.digits):,} digits long; no model has that many "
                     "layers, so it was not read as a layer. The log is corrupt, synthetic, or not an engine's."),
        fix="Check where the log came from; diagnose the engine's own output.", lines=(r.line,),
        matched=f"{r.text[:60]}...", engine="", details={"digits": len(r.digits)},
    )


def _add(found: dict, seen_lines: dict, finding: Finding) -> None:
    key = _dedupe_key(finding)
    if key in found:
        seen_lines[key].extend(finding.lines)
        old = found[key]
        # Show the exception line ("AssertionError: ...") rather than the source line that raised it.
        if _is_exception(finding.matched) and not _is_exception(old.matched):
            found[key] = finding
    else:
        found[key] = finding
        seen_lines[key] = list(finding.lines)


def _is_exception(line: str) -> bool:
    return bool(_EXCEPTION.match(line.strip()))


_SUPERSEDES: dict[str, tuple[str, ...]] = {}
for _p in PATTERNS:
    _SUPERSEDES.setdefault(_p.code, _p.supersedes)


def _supersedes(code: str) -> tuple[str, ...]:
    return _SUPERSEDES.get(code, ())


def diagnose_log(text: str, layer_map: LayerMap | None = None) -> list[Finding]:
    """Just the findings, for callers that do not need the facts (the Run tab on a crash)."""
    return diagnose(text, layer_map).findings
