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


@dataclass
class SessionRecord:
    model: dict = field(default_factory=dict)  # name, source, family, layers, params...
    images: dict[str, bytes] = field(default_factory=dict)  # caption -> PNG bytes
    findings: list[dict] = field(default_factory=list)  # validation and diagnosis findings
    plan: dict = field(default_factory=dict)
    startup: dict = field(default_factory=dict)  # figures parsed from the engine's start-up log
    chats: list[dict] = field(default_factory=list)  # prompt, answer, ttft_s, tok_s
    log_tail: list[str] = field(default_factory=list)
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
    if record.model:
        parts += ["<h2>Model</h2>", _table(record.model)]
    for caption, png in record.images.items():
        data = base64.b64encode(png).decode("ascii")
        parts.append(f"<h2>{e(caption)}</h2><img alt='{e(caption)}' src='data:image/png;base64,{data}'>")
    if record.findings:
        parts.append("<h2>Findings</h2><table><tr><th>severity</th><th>code</th><th>message</th><th>fix</th><th>layers</th></tr>")
        for f in record.findings:
            sev = str(f.get("severity", "info"))
            parts.append(
                f"<tr><td class='{e(sev)}'>{e(sev)}</td><td>{e(str(f.get('code', '')))}</td>"
                f"<td>{e(str(f.get('message') or f.get('title') or ''))}</td><td>{e(str(f.get('fix', '')))}</td>"
                f"<td>{e(_fmt(f.get('layers') or []))}</td></tr>")
        parts.append("</table>")
    if record.plan:
        parts += ["<h2>Memory plan</h2>", _table(record.plan)]
    if record.startup:
        parts += ["<h2>Engine start-up</h2>", _table(record.startup)]
    if record.chats:
        parts.append("<h2>Chat samples</h2>")
        for chat in record.chats:
            figures = ", ".join(f"{k} {_fmt(chat[k])}" for k in ("ttft_s", "tok_s") if chat.get(k) is not None)
            parts.append(f"<p><b>Prompt:</b> {e(chat.get('prompt', ''))}<br><b>Answer:</b> {e(chat.get('answer', ''))}"
                         f"<br><span class='muted'>{e(figures)}</span></p>")
    if record.log_tail:
        parts += ["<h2>Engine log (last lines)</h2>", f"<pre>{e(chr(10).join(record.log_tail))}</pre>"]
    parts.append("</body></html>")
    return "\n".join(parts)


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
