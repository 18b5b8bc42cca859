"""The general reader's answer as a finding: the failing line, the class it most likely belongs to
(with the reasoning and the confidence), the layers it names on the map, the stage it died in, the
engine frame, and what to try, in the flags of the engine that wrote the log."""

from __future__ import annotations

import re

from bringup.core.finding import Finding, LayerInfo

from .reading import Reading, stage_label

GIB = r"([\d.]+)\s*GiB"

# What to try, per class and engine (the flags each engine really has).
_ADVICE = {
    "memory": {
        "vllm": "Lower --max-model-len or --max-num-seqs, raise --gpu-memory-utilization if the card is not shared, use "
                "--kv-cache-dtype fp8, or spread the weights with --tensor-parallel-size / --pipeline-parallel-size.",
        "sglang": "Lower --mem-fraction-static's share for activations (raise it for pools), --max-running-requests or "
                  "--context-length; spread the weights with --tp; --mamba-ssm-dtype bfloat16 halves the state.",
        "llama.cpp": "Offload fewer layers (-ngl), shrink the context (-c) or quantise the KV cache (-ctk/-ctv q8_0).",
        "": "Use a smaller context or batch, quantised weights or KV cache, or more devices; bringup plan shows which fits.",
    },
    "divisibility": {
        "vllm": "Pick --tensor-parallel-size among the divisors of the count named (or use --pipeline-parallel-size, "
                "which splits layers, not heads).",
        "sglang": "Pick --tp among the divisors of the count named (or --pp-size, which splits layers).",
        "llama.cpp": "The GGUF's sizes do not fit this build's assumption: update llama.cpp or re-convert the model.",
        "": "Choose a parallel size that divides the model's heads, groups and experts.",
    },
    "layer_lookup": {
        "vllm": "Check the layer against the map: a rank (PP), a draft (MTP) or a KV cache group that holds other layers "
                "asked for it. Try without --pipeline-parallel-size, or a vLLM release that fixes the model's PP path.",
        "sglang": "Check the layer against the map: an attention backend or pool that assumes every layer is attention "
                  "asked for it (PR #32227); pick a backend that asks the pool (get_v_head_dim) or upgrade.",
        "": "Check the named layer against the map: the code asked a container for a layer it does not hold.",
    },
    "weights_mismatch": {
        "": "The checkpoint's tensor names do not match the model the engine built: check the quantisation format is "
            "supported for this architecture, the MTP/draft layers' names, and that the files are complete.",
    },
    "shape": {"": "Compare both shapes with the config fields that make them (hidden size, heads, head_dim, d_state); the "
                  "checkpoint and the config are from different models or a field was overridden."},
    "device_coverage": {
        "vllm": "Use a backend this device has (VLLM_ATTENTION_BACKEND), --enforce-eager, or a build for this device.",
        "sglang": "Use an attention backend this device has (--attention-backend), or a build with kernels for it.",
        "": "Run the op on a device that has it, or use a build with kernels for this device and dtype.",
    },
    "feature_combination": {"vllm": "Turn one of the two features off (e.g. --no-enable-prefix-caching or the "
                                    "--speculative-config), as the message says.",
                            "sglang": "Turn one of the two off (e.g. --disable-radix-cache or speculative decoding).",
                            "": "Turn one of the two features off, as the message says."},
    "device_fault": {"": "Check the driver and runtime (Level Zero / oneCCL / NCCL) versions and device visibility; a "
                         "single-device run tells a collective problem from a device one."},
    "fatal_signal": {"": "Read the native frames above the signal; rerun with the engine's eager mode (no graphs) to see "
                         "whether the capture or a kernel crashed."},
    "version_mismatch": {"": "Install matching releases (the engine pins its transformers/torch versions)."},
}


def _advice(cls: str | None, engine: str) -> str:
    table = _ADVICE.get(cls or "", {})
    return table.get(engine) or table.get("", "Read the innermost frames above the failing line; they name the file "
                                                "and call that failed.")


def memory_figures(lines: list[str], run: dict) -> str:
    """The log's own memory figures compared: weights against the device, asked against free."""
    text = "\n".join(lines[-4000:])
    weights = re.search(r"(?:Model loading took|Loading model weights took) ([\d.]+) (?:GiB|GB)|mem usage=([\d.]+) GB", text)
    total = re.search(r"total capacity of " + GIB + r"|total memory: (\d+)", text)
    asked = re.search(r"Tried to allocate ([\d.]+ [MG]iB)", text)
    free = re.search(r"([\d.]+ [MG]iB) (?:is )?free", text)
    parts = []
    w = next((float(g) for g in (weights.groups() if weights else ()) if g), None)
    t = None
    if total:
        t = float(total.group(1)) if total.group(1) else int(total.group(2)) / 2**30
    if w is not None and t:
        share = w / t
        parts.append(f"the weights took {w:.2f} GiB of the device's {t:.2f} GiB ({share:.0%})"
                     + (": they alone do not fit, so no memory setting can help; spread them over more devices "
                        f"(at least {int(w // (t * 0.9)) + 1}) or quantise them" if share > 0.9 else ""))
    if asked and free:
        parts.append(f"it asked for {asked.group(1)} with {free.group(1)} free")
    return "; ".join(parts)


def general_finding(reading: Reading, lines: list[str]) -> Finding | None:
    f = reading.failure
    if f is None:
        return None
    top = reading.classes[0] if reading.classes else None
    cls = top.name if top else None
    confidence = top.confidence if top else 0.2
    said = f"{f.exception}: {f.message}" if f.exception and f.message else f.exception or f.text
    title = f"{top.title}: {said[:160]}" if top else said[:200]
    parts = []
    if top:
        parts.append(f"Most likely {cls.replace('_', ' ')} ({confidence:.0%}): " + "; ".join(top.reasons) + ".")
        others = [f"{g.name.replace('_', ' ')} {g.confidence:.0%}" for g in reading.classes[1:3]]
        if others:
            parts.append("Also possible: " + ", ".join(others) + ".")
    else:
        parts.append("No general class fits the failing line; it is shown as the log's failure, with low confidence.")
    if f.chain:
        parts.append("It was raised from: " + " <- ".join(f.chain[-3:]) + ".")
    if reading.stage:
        parts.append(f"It died in the {stage_label(reading.stage)} stage ({reading.stage_why}).")
    if reading.layers:
        parts.extend(w.sentence[0].upper() + w.sentence[1:] for w in reading.layers[:4])
    elif reading.named_layers:
        shown = ", ".join(map(str, reading.named_layers[:8]))
        parts.append(f"It names layer{'s' if len(reading.named_layers) > 1 else ''} {shown} (give the model to see "
                     "what they are on the map).")
    if reading.absurd:
        parts.append(f"It names a layer id of {len(reading.absurd[0].digits):,} digits, which no model has: the log is "
                     "corrupt or not an engine's.")
    frame = reading.engine_frame
    if frame is not None:
        parts.append(f"Innermost {frame.engine} frame: {frame.relative}:{frame.line} in {frame.func}.")
    figures = memory_figures(lines, reading.run) if cls == "memory" else ""
    if figures:
        parts.append("From the log's figures: " + figures + ".")
    infos = tuple(LayerInfo(w.layer, w.mixer, w.ffn) for w in reading.layers if w.mixer is not None)
    code = f"FAILURE_{cls.upper()}" if cls else "UNRECOGNIZED_ERROR"  # the old code: scripts gate on it
    return Finding(
        kind="log", code=code, severity="error", title=title, explanation=" ".join(parts),
        fix=_weights_first(figures, reading.engine) + _advice(cls, reading.engine), lines=(f.line,), matched=f.text[:400], engine=reading.engine,
        source="general reader (core/diagnosis/reading.py)", layers=reading.named_layers,
        valid=infos, stage=reading.stage or "",
        details={"class": cls, "confidence": round(confidence, 2), "failure_kind": f.kind},
    )


# Flags only SGLang has: advice holding them does not fit another engine's log.
_SGLANG_FLAGS = re.compile(r"--mem-fraction-static|--tp-size|--max-running-requests|--chunked-prefill-size|"
                           r"--mamba-\w+|--disable-radix-cache|--attention-backend")


_TP_FLAG = {"vllm": "--tensor-parallel-size", "sglang": "--tp", "llama.cpp": "--tensor-split over more devices"}


def _weights_first(figures: str, engine: str) -> str:
    """When the log's figures say the weights alone exceed the device, that advice comes first."""
    m = re.search(r"at least (\d+)", figures)
    if not m:
        return ""
    return (f"The weights alone do not fit one device: spread them with {_TP_FLAG.get(engine, 'tensor parallelism')} "
            f"{m.group(1)} (or more), or use quantised weights. Then: ")


def fit_advice_to_engine(findings: list[Finding], reading: Reading, lines: list[str]) -> list[Finding]:
    """Catalogue findings written with SGLang's flags, on a log another engine wrote: the fix in that
    engine's flags, and for memory the log's own figures (weights against the device)."""
    from dataclasses import replace

    engine = reading.engine
    if engine in ("", "sglang") or not reading.classes:
        return findings
    cls = reading.classes[0].name
    out = []
    for f in findings:
        if f.severity == "error" and _SGLANG_FLAGS.search(f.fix) and f.engine in ("", "torch", "sglang", "system"):
            explanation = f.explanation
            figures = memory_figures(lines, reading.run) if cls == "memory" else ""
            if figures:
                explanation += f" From the log's figures: {figures}."
            f = replace(f, fix=_weights_first(figures, engine) + _advice(cls, engine)
                        + f" (These are {engine}'s flags: {engine} wrote this log.)",
                        explanation=explanation)
        out.append(f)
    return out
