"""One self-contained HTML file of a bring-up session, for people who were not in the room.

The window collects what it has (model, layer map image, findings, plan, graphs, chat samples,
the engine's start-up figures, the log's end) into a SessionRecord; this module only renders and
writes it, atomically, so a failed export never leaves half a file.
"""

from __future__ import annotations

import base64
import html
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bringup.core.compare.divergence import after_parting_text, flips_text
from bringup.core.numerics.kernel_rows import row_label


@dataclass
class SessionRecord:
    model: dict = field(default_factory=dict)  # the map's model: name, source, family, layers, params...
    served: dict = field(default_factory=dict)  # what the engine ran, from its /server_info (ServedModel.facts())
    random_weights: bool = False  # the served weights were random: its answers are noise
    images: dict[str, bytes] = field(default_factory=dict)  # caption -> PNG bytes
    findings: list[dict] = field(default_factory=list)  # validation and diagnosis findings
    plan: dict = field(default_factory=dict)
    startup: dict = field(default_factory=dict)  # figures parsed from the engine's start-up log
    chats: list[dict] = field(default_factory=list)  # prompt, answer, ttft_s, tok_s
    log_tail: list[str] = field(default_factory=list)
    numerics: dict = field(default_factory=dict)  # "kernels": check-kernels JSON, "compare": compare JSON
    ab: dict = field(default_factory=dict)  # the Compare tab's `bringup ab --json`: "servers" and/or "layers"
    title: str = "Bring-up session"


_CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #1d2330; }
h1 { font-size: 1.6em; margin-bottom: .2em } h2 { border-bottom: 1px solid #d8dde6; padding-bottom: .2em; margin-top: 1.6em }
table { border-collapse: collapse; margin: .5em 0 } td, th { border: 1px solid #d8dde6; padding: .25em .6em; text-align: left; vertical-align: top }
th { background: #f2f4f8 } img { max-width: 100%; border: 1px solid #d8dde6; border-radius: 4px }
.error { color: #b3261e; font-weight: 600 } .warning { color: #a35c00; font-weight: 600 } .info { color: #2b5797 }
pre { background: #f6f7f9; padding: .8em; overflow-x: auto; font-size: 12px } .muted { color: #6b7385 }
"""


def _table(rows: dict) -> str:
    cells = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(_fmt(v))}</td></tr>" for k, v in rows.items())
    return f"<table>{cells}</table>"


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:,.4g}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, (list, tuple)):
        return ", ".join(_fmt(v) for v in value)
    return "" if value is None else str(value)


def render_html(record: SessionRecord) -> str:
    e = html.escape
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{e(record.title)}</title>",
             f"<style>{_CSS}</style></head><body>",
             f"<h1>{e(record.title)}</h1><p class='muted'>Exported {e(time.strftime('%Y-%m-%d %H:%M:%S'))} by Bring-up Workbench</p>"]
    if record.served:
        parts += ["<h2>Served model</h2>", "<p class='muted'>What the engine ran, from its /server_info.</p>",
                  _table(record.served)]
        if record.random_weights:
            parts.append("<p class='error' style='font-size:1.3em'>Random weights: the answers below are noise, "
                         "not the model's.</p>")
    else:
        parts.append("<h2>Served model</h2><p class='muted'>No engine ran in this session.</p>")
    if record.model:
        heading = "Model on the map" + ("" if not record.served else " (the layer map below)")
        parts += [f"<h2>{heading}</h2>", _table(record.model)]
    for caption, png in record.images.items():
        data = base64.b64encode(png).decode("ascii")
        parts.append(f"<h2>{e(caption)}</h2><img alt='{e(caption)}' src='data:image/png;base64,{data}'>")
    if record.findings:
        parts.append("<h2>Findings</h2><table><tr><th>severity</th><th>code</th><th>message</th><th>fix</th><th>layers</th>"
                     "<th>log lines</th></tr>")
        for f in record.findings:
            sev = str(f.get("severity", "info"))
            said = f.get("explanation") if f.get("title") else ""
            message = str(f.get("message") or f.get("title") or "") + (f": {said}" if said else "")
            parts.append(
                f"<tr><td class='{e(sev)}'>{e(sev)}</td><td>{e(str(f.get('code', '')))}</td>"
                f"<td>{e(message)}</td><td>{e(str(f.get('fix', '')))}</td>"
                f"<td>{e(_fmt(f.get('layers') or []))}</td><td>{_log_lines(f)}</td></tr>")
        parts.append("</table>")
    if record.numerics.get("kernels"):
        parts += _kernels_html(record.numerics["kernels"])
    if record.numerics.get("compare"):
        parts += _compare_html(record.numerics["compare"])
    if record.ab.get("servers"):
        parts += _ab_servers_html(record.ab["servers"])
    if record.ab.get("layers"):
        parts += _ab_layers_html(record.ab["layers"])
    if record.plan:
        parts += ["<h2>Memory plan</h2>", _table(record.plan)]
    if record.startup:
        parts += ["<h2>Engine start-up</h2>", _table(record.startup)]
    if record.chats:
        parts.append("<h2>Chat samples</h2>")
        for chat in record.chats:
            figures = ", ".join(f"{k} {_fmt(chat[k])}" for k in ("ttft_s", "tok_s") if chat.get(k) is not None)
            who = f" ({chat['model']}{', random weights: noise' if chat.get('random_weights') else ''})" if chat.get("model") else ""
            parts.append(f"<p><b>Prompt:</b> {e(chat.get('prompt', ''))}<br><b>Answer{e(who)}:</b> {e(chat.get('answer', ''))}"
                         f"<br><span class='muted'>{e(figures)}</span></p>")
    if record.log_tail:
        parts += ["<h2>Engine log (last lines)</h2>", f"<pre>{e(chr(10).join(record.log_tail))}</pre>"]
    parts.append("</body></html>")
    return "\n".join(parts)


def _log_lines(finding: dict) -> str:
    """The log lines a diagnosis read ("line 12: ValueError: ..."), as the finding carries them."""
    numbers = finding.get("lines") or []
    matched = finding.get("matched") or ""
    if not numbers and not matched:
        return ""
    where = "line " + ", ".join(str(n) for n in numbers[:6]) if numbers else ""
    text = f"<code>{html.escape(str(matched))}</code>" if matched else ""
    return html.escape(where) + (": " if where and text else "") + text


def _num(value, fmt: str = ".2e") -> str:
    return "-" if value is None else format(value, fmt)


def _banded(rel, tol) -> str:
    from bringup.core.numerics.error_bands import ERROR_COLORS, error_band

    return f"<td style='background:{ERROR_COLORS[error_band(rel, tol)]}'>{html.escape(_num(rel))}</td>"


def _finding_lines(doc: dict) -> list[str]:
    e = html.escape
    return [f"<p class='{e(str(f.get('severity', 'info')))}'>{e(str(f.get('message', '')))}</p>"
            + (f"<p class='muted'>fix: {e(str(f['fix']))}</p>" if f.get("fix") else "")
            for f in doc.get("findings") or []]


def _kernels_html(doc: dict) -> list[str]:
    """`bringup check-kernels --json`: one row per kernel, its error coloured against its tolerance."""
    e = html.escape
    rows_in = doc.get("kernels") or []
    reference = sum(1 for k in rows_in if k.get("implementation") == "reference")
    verdict = (f"{len(rows_in) - reference} device kernels pass" + (
        f"; {reference} rows run the plain reference there (no device kernel: compared with itself)" if reference else "")
               if doc.get("ok") else "FAILED")
    rows = ["<h2>Kernel check</h2>", f"<p>{e(str(doc.get('device', '')))}: {verdict}</p>",
            "<table><tr><th>kernel</th><th>implementation</th><th>dtype</th><th>shape</th><th>max abs</th>"
            "<th>max rel</th><th>tolerance</th><th>ms</th><th>reference ms</th><th>verdict</th></tr>"]
    for k in doc.get("kernels") or []:
        rel = k.get("max_rel_err") if k.get("max_rel_err") is not None else float("nan")
        rows.append(f"<tr><td>{e(row_label(k))}</td><td>{e(str(k.get('implementation') or ''))}</td>"
                    f"<td>{e(str(k.get('dtype')))}</td><td>{e('x'.join(map(str, k.get('shape') or [])))}</td>"
                    f"<td>{_num(k.get('max_abs_err'))}</td>{_banded(rel, k.get('tolerance') or 0.0)}"
                    f"<td>{_num(k.get('tolerance'), '.0e')}</td><td>{_num(k.get('ms'), '.3f')}</td>"
                    f"<td>{_num(k.get('reference_ms'), '.3f')}</td>"
                    f"<td>{e(str(k.get('verdict') or ('ok' if k.get('ok') else 'WRONG')))}</td></tr>")
    return rows + ["</table>"] + _finding_lines(doc)


def _compare_html(doc: dict) -> list[str]:
    """`bringup compare --json`: each block's relative error against the reference, coloured."""
    e = html.escape
    tol = doc.get("tolerance")
    first = doc.get("first_divergent_layer")
    where = f" ({doc['source_file']})" if doc.get("source_file") else ""
    weights = f" ({doc['weights']})" if doc.get("weights") else ""  # a quantized run's scheme
    head = (f"{doc.get('device', '')}{where} {doc.get('dtype', '')}{weights} against {doc.get('reference', 'the reference')}, "
            f"{doc.get('num_tokens', 0)} tokens, tolerance {_num(tol, '.0e')}: "
            + (f"block {first} first exceeds the tolerance" if first is not None else "no block exceeds the tolerance"))
    rows = ["<h2>Block comparison</h2>", f"<p>{e(head)}</p>",
            "<table><tr><th>block</th><th>mixer</th><th>ffn</th><th>rel err</th><th>max abs</th>"
            "<th>routing flips</th></tr>"]
    for l in doc.get("layers") or []:
        flips = "" if l.get("routing_flips") is None else str(l["routing_flips"])
        rows.append(f"<tr><td>{l['index']}</td><td>{e(l['mixer'])}</td><td>{e(l['ffn'])}</td>"
                    f"{_banded(l.get('rel_err'), tol)}<td>{_num(l.get('max_abs_err'))}</td><td>{flips}</td></tr>")
    return rows + ["</table>"] + _finding_lines(doc)


def _ab_servers_html(doc: dict) -> list[str]:
    """`bringup ab URL_A URL_B --json`: the verdict and each prompt's agreement."""
    e = html.escape
    v = doc.get("verdict") or {}
    rows = ["<h2>A/B: two servers</h2>", f"<p>A {e(doc.get('a', ''))}, B {e(doc.get('b', ''))}: "
            f"<b>{e(v.get('word', ''))}</b>, {e(v.get('reason', ''))}</p>",
            "<table><tr><th>agreement</th><th>parts at</th><th>A</th><th>B</th><th>prompt</th></tr>"]
    for p in doc.get("prompts") or []:
        d = p.get("divergence") or {}
        rows.append(f"<tr><td>{p.get('agreement', 0):.0%}</td><td>{e(str(d.get('position', '-')))}</td>"
                    f"<td>{e(repr(d['a']) if d else '')}</td><td>{e(repr(d['b']) if d else '')}</td>"
                    f"<td>{e(str(p.get('prompt', '')))}</td></tr>")
    return rows + ["</table>"]


def _ab_layers_html(doc: dict) -> list[str]:
    """`bringup ab --layers --json`: where the two settings part, step by step."""
    e = html.escape
    first, state = doc.get("first"), doc.get("first_state")
    said = []
    if state:
        said.append(f"layer {state['block']}'s {state['what']} parts after step {state['step']}")
    if first:
        said.append(f"block {first['block']} parts at step {first['step']} ({first['kind']}, {first['cause']})")
    if doc.get("routing_flips"):
        after = doc.get("routing_flips_after_parting")
        said.append(f"{doc['routing_flips']} routing flip(s), counted apart"
                    + (f" ({after_parting_text(doc['routing_flips'], after)})" if after else ""))
    rows = ["<h2>A/B: two engine settings</h2>",
            f"<p>A {e(doc.get('a', ''))}; B {e(doc.get('b', ''))}: {e('; '.join(said) or 'no block or state parts')}</p>"]
    if doc.get("calibration"):  # each block's tolerance is its own: the worst errors below go uncoloured
        rows.append(f"<p>tolerances ({e(doc.get('noise_name') or 'noise')}): {e(doc['calibration'])}</p>")
    rows.append("<table><tr><th>step</th><th>kind</th><th>worst block</th><th>rel err</th><th>flips</th></tr>")
    tol = None if doc.get("calibration") else doc.get("tolerance")
    for s in doc.get("steps") or []:
        flips = flips_text(s.get("flips") or {})
        rows.append(f"<tr><td>{s['step']}</td><td>{e(s['kind'])}</td><td>{e(str(s.get('worst_block', '')))}</td>"
                    f"{_banded(s.get('worst_rel_err'), tol)}<td>{e(flips)}</td></tr>")
    return rows + ["</table>"]


def write_report(record: SessionRecord, path: str | Path) -> Path:
    """Write atomically: a temp file in the same folder, then rename over the target."""
    path = Path(path)
    text = render_html(record)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=str(path.parent))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path
