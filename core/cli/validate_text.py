"""Human text for `bringup validate`: the verdict, resolved settings, findings and command; the matrix as grids."""

from __future__ import annotations

import textwrap

_VERDICT = {"ok": "OK: the launch should start", "warning": "OK with warnings", "failure": "FAILS"}
_CELL = {"ok": "ok", "warning": "warn", "failure": "FAIL"}


def _wrap(label: str, text: str, indent: int = 10) -> list[str]:
    body = textwrap.wrap(text, width=110 - indent - len(label)) or [""]
    pad = " " * indent
    return [pad + label + body[0]] + [pad + " " * len(label) + line for line in body[1:]]


def render_result(result) -> str:
    r, t = result.resolved, result.target
    profile = f" (rules of {t.profile.label})" if t.profile else ""
    errors = sum(f.severity == "error" for f in result.findings)
    warnings = sum(f.severity == "warning" for f in result.findings)
    first = result.first_error
    lines = [f"{result.model} on {t.label}{profile}, device {result.settings.device}",
             f"Verdict: {_VERDICT[result.verdict]} ({errors} error{'s' * (errors != 1)}, "
             f"{warnings} warning{'s' * (warnings != 1)}){f'; first failure: {first.code}' if first else ''}", "",
             "Resolved settings"]
    rows = [
        ("attention backend", r.attention_backend or "(engine kernels)", r.why.get("attention_backend", "")),
        ("mamba strategy", r.mamba_strategy or "none", r.why.get("mamba_strategy", "")),
        ("page size", str(r.page_size), r.why.get("page_size", "")),
        ("radix / overlap", f"{'on' if r.radix_cache else 'off'} / {'on' if r.overlap_schedule else 'off'}", ""),
        ("state slots/request", str(r.state_slots_per_request) if r.state_slots_per_request else "-", ""),
        ("tp / pp", f"{r.tp} / {r.pp}", ""),
        ("dtypes", f"model {r.dtype}, kv {r.kv_dtype}"
         + (f", ssm {r.mamba_ssm_dtype}, conv {r.mamba_conv_dtype}" if r.mamba_ssm_dtype else ""),
         f"ssm: {r.why['mamba_ssm_dtype']}" if r.why.get("mamba_ssm_dtype") else ""),
    ]
    for name, value, why in rows:
        lines.append(f"  {name:<20} {value}" + (f"  ({why})" if why else ""))
    if result.findings:
        lines += ["", "Findings (in the order the engine meets them)"]
        for f in result.findings:
            stage = f"  [{f.stage}]" if f.stage else ""
            lines.append(f"  {f.severity.upper():<7} {f.code}{stage}")
            lines += _wrap("", f.message)
            if f.engine_message:
                lines += _wrap("engine: ", f.engine_message)
            if f.fix:
                lines += _wrap("fix:    ", f.fix)
            if f.layers:
                lines += _wrap("layers: ", ", ".join(map(str, f.layers)))
            if f.source:
                lines += _wrap("source: ", f.source)
    lines += ["", "Command", "  " + result.command]
    return "\n".join(lines)


def render_matrix(matrix) -> str:
    counts = matrix.counts()
    lines = [f"Compatibility matrix: {matrix.model} on {matrix.target.label} "
             f"({counts['ok']} ok, {counts['warning']} warning, {counts['failure']} failure)"]
    width = max(len(s) for s in matrix.strategies) + 2
    for device in matrix.devices:
        backends = matrix.backends[device]
        cols = [max(len(b), 4) + 2 for b in backends]
        lines.append("")
        lines.append(f"  {device:<{width}}" + "".join(f"{b:<{w}}" for b, w in zip(backends, cols)))
        for strategy in matrix.strategies:
            cells = [_CELL[matrix.cell(device, strategy, b).verdict] for b in backends]
            lines.append(f"  {strategy:<{width}}" + "".join(f"{c:<{w}}" for c, w in zip(cells, cols)))
    return "\n".join(lines)
