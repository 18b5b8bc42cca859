"""`bringup diagnose LOGFILE|- [--model SOURCE] [--json]`: name the failures in an engine log.

Exit code 0 when no error was found, 1 when errors were found (so scripts can gate on it), 2 for
bad input (a missing file, an unknown model).
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path

WIDTH = 100


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("logfile", help="the log or traceback to read; - reads standard input")
    parser.add_argument("--model", metavar="SOURCE",
                        help="the model the log came from (config.json, folder, catalogue name or hub id): layer "
                             "findings then say what the requested and valid layers are")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of text")


def read_log(name: str):
    """The log as LogText: streamed within the reader's cap (head and tail kept), decoded by its BOM."""
    from bringup.core.diagnosis.reader import NotText, read_path, read_stream
    from bringup.core.errors import UserError

    try:
        if name == "-":
            if sys.stdin.isatty():
                print("reading the log from standard input; paste it, then press Ctrl-D", file=sys.stderr)
            raw = getattr(sys.stdin, "buffer", None)
            if raw is None:  # a text stream (tests, an embedding shell): already decoded
                from bringup.core.diagnosis.reader import read_text

                return read_text(sys.stdin.read())
            return read_stream(raw, "standard input")
        path = Path(name)
        if not path.exists():
            raise UserError(f"no log file at {name}; give the path of a log, or - to read standard input")
        if path.is_dir():
            raise UserError(f"{name} is a folder; give the log file inside it")
        return read_path(path)
    except NotText as err:
        raise UserError(str(err)) from err
    except OSError as err:
        raise UserError(f"cannot read {name}: {err}") from err


def main(args: argparse.Namespace) -> int:
    from bringup.core.diagnosis import diagnose

    log = read_log(args.logfile)
    text = log.text
    if not text.strip():
        from bringup.core.errors import UserError

        where = "standard input was" if args.logfile == "-" else f"{args.logfile} is"
        raise UserError(f"{where} empty: there is no log to read; capture the engine's output with its errors "
                        "(e.g. python -m sglang.launch_server ... 2>&1 | tee crash.log), then diagnose that file")
    layer_map = None
    if args.model:
        from bringup.core.sources.resolve import load_layer_map

        layer_map = load_layer_map(args.model)
    result = diagnose(text, layer_map, skipped_note=log.note)
    if layer_map is None:  # the log's own model path, when it is on this machine: its map names the layers
        layer_map = _map_of_logged_model(result)
        if layer_map is not None:
            result = diagnose(text, layer_map, skipped_note=log.note)
    if args.json:
        json.dump(result.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_text(result, "standard input" if args.logfile == "-" else args.logfile))
    return 0 if result.ok else 1


def _map_of_logged_model(result):
    """The layer map of the model the log names (`--model /path`, `model_path='...'`), if that folder or
    config is here; never a hub download (a diagnosis stays offline)."""
    model = (result.reading.run.get("model") if result.reading is not None else None) or ""
    path = Path(model)
    if not model or not (path.is_dir() and (path / "config.json").is_file() or path.suffix in (".json", ".gguf") and path.is_file()):
        return None
    from bringup.core.errors import UserError
    from bringup.core.sources.resolve import load_layer_map

    try:
        return load_layer_map(str(path))
    except (UserError, OSError, ValueError):
        return None


def _wrap(label: str, text: str) -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=f"  {label:<5}", subsequent_indent=" " * 7) or [f"  {label}"]


def _layer_line(f) -> str:
    if f.requested is not None:
        kinds = sorted({v.mixer for v in f.valid})
        return (f"requested {f.requested_layer} ({f.requested.mixer}), valid {list(f.valid_layers)} "
                f"({' / '.join(kinds) or '?'})")
    return f"requested {f.requested_layer}, valid {list(f.valid_layers)} (add --model to name them)"


def render_text(result, name: str) -> str:
    counts = {s: sum(f.severity == s for f in result.findings) for s in ("error", "warning", "info")}
    summary = ", ".join(f"{n} {s}{'s' if n != 1 else ''}" for s, n in counts.items() if n) or "nothing recognised"
    out = [f"{name}: {summary} in {result.lines_read} lines"]
    if result.note:
        out += textwrap.wrap(result.note, WIDTH, initial_indent="  note: ", subsequent_indent=" " * 8)
    out += _reading_lines(result.reading)
    if result.facts:
        facts = " ".join(f"{k}={v}" for k, v in result.facts.items())
        out += textwrap.wrap(facts, WIDTH, initial_indent="  launch: ", subsequent_indent=" " * 10)
    for f in result.findings:
        where = "line" if len(f.lines) == 1 else "lines"
        shown = ", ".join(map(str, f.lines[:8])) + (" ..." if len(f.lines) > 8 else "")
        out.append("")
        out.append(f"{f.severity.upper()} {f.code}  ({where} {shown})")
        out.append(f"  {f.title}")
        out += _wrap("why", f.explanation)
        out += _wrap("fix", f.fix)
        if f.requested_layer is not None:
            out += _wrap("map", _layer_line(f))
        out.append(f"  > {f.matched[:WIDTH * 2]}")
        if f.source:
            out += _wrap("see", f.source)
    if not result.findings and (result.reading is None or not result.reading.failed):
        out.append("  No failure found: no exception, assert, signal or error line. If the engine still failed, the "
                   "cause may be above the captured part of the log.")
    return "\n".join(out) + "\n"


def _reading_lines(reading) -> list[str]:
    """The general reader's summary: engine and run, the failing line, class, stage, layers."""
    if reading is None:
        return []
    from bringup.core.diagnosis.reading import stage_label

    run = " ".join(f"{k}={v}" for k, v in reading.run.items())
    out = [f"  engine: {reading.engine or 'unknown'}" + (f"  {run}" if run else "")]
    if reading.failure is not None:
        f = reading.failure
        out.append(f"  failed at line {f.line} ({f.kind}): {f.text[:WIDTH]}")
        if reading.classes:
            top = reading.classes[0]
            out.append(f"  class: {top.name} ({top.confidence:.0%})" + "".join(
                f", {g.name} ({g.confidence:.0%})" for g in reading.classes[1:3]))
        out.append(f"  stage: {stage_label(reading.stage)}" + (f" ({reading.stage_why})" if reading.stage else ""))
        frame = reading.engine_frame
        if frame is not None:
            out.append(f"  frame: {frame.relative}:{frame.line} in {frame.func}")
    if reading.layers:
        out += [w for l in reading.layers for w in textwrap.wrap(l.sentence, WIDTH, initial_indent="  layer: ",
                                                                    subsequent_indent=" " * 9)]
    elif reading.named_layers:
        out.append(f"  layers named: {', '.join(map(str, reading.named_layers[:12]))}")
    return out
