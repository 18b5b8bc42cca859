"""A diagnosis as a markdown issue report: the facts the log states, the failure with its lines,
the class and reasoning, the stage, the named layers in the map's words, the engine frame."""

from __future__ import annotations

from .reading import stage_label
from .result import Diagnosis


def issue_markdown(diagnosis: Diagnosis, source: str = "", map_image: str = "") -> str:
    r = diagnosis.reading
    out = ["## Crash report" + (f" ({source})" if source else ""), ""]
    if r is not None:
        run = ", ".join(f"{k} `{v}`" for k, v in r.run.items())
        out.append(f"- **Engine:** {r.engine or 'unknown'}" + (f" ({run})" if run else ""))
        if diagnosis.model:
            out.append(f"- **Model (map):** {diagnosis.model}")
        if r.failure is not None:
            out.append(f"- **Failed at line {r.failure.line}** ({r.failure.kind}): `{r.failure.text[:300]}`")
            if r.failure.chain:
                out.append(f"- **Raised from:** {' <- '.join('`' + c + '`' for c in r.failure.chain[-3:])}")
        if r.classes:
            top = r.classes[0]
            out.append(f"- **Class:** {top.name} ({top.confidence:.0%}): {'; '.join(top.reasons)}")
        out.append(f"- **Stage:** {stage_label(r.stage)}" + (f" ({r.stage_why})" if r.stage else ""))
        reached = ", ".join(f"{stage_label(s)} (line {n})" for s, n in r.reached)
        if reached:
            out.append(f"- **Start-up reached:** {reached}")
        frame = r.engine_frame
        if frame is not None:
            out.append(f"- **Engine frame:** `{frame.relative}:{frame.line}` in `{frame.func}`")
        if r.layers:
            out.append("- **Layers named:**")
            out += [f"  - {w.sentence}" for w in r.layers]
        elif r.named_layers:
            out.append(f"- **Layers named:** {', '.join(map(str, r.named_layers))}")
    if diagnosis.note:
        out.append(f"- **Note:** {diagnosis.note}")
    out += ["", "### Findings", ""]
    for f in diagnosis.findings:
        lines = ", ".join(map(str, f.lines[:8]))
        out.append(f"**{f.severity.upper()} {f.code}** (line{'s' if len(f.lines) > 1 else ''} {lines}): {f.title}")
        out.append("")
        out.append(f"{f.explanation}")
        if f.fix:
            out.append(f"\n*Try:* {f.fix}")
        if f.matched:
            out += ["", "```", f.matched, "```"]
        out.append("")
    if map_image:
        out += ["### Layer map", "", f"![layer map]({map_image})", ""]
    return "\n".join(out).rstrip() + "\n"
