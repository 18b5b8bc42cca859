"""How a child process ended, in words: the probe, the Run tab and the demo say it the same way."""

from __future__ import annotations

import signal

# Why a process usually gets each signal, for the person reading the message.
_LIKELY = {
    signal.SIGKILL: "out of memory, or killed from outside",
    signal.SIGSEGV: "a crash in native code: a kernel, a driver or a library",
    signal.SIGABRT: "a native library aborted",
    signal.SIGTERM: "asked to stop from outside",
}


def exit_text(code: int) -> str:
    """'exited with code 2', or for a negative code (POSIX: ended by a signal) 'was killed by SIGKILL'."""
    if code >= 0:
        return f"exited with code {code}"
    try:
        sig = signal.Signals(-code)
    except ValueError:
        return f"was killed by signal {-code}"
    return f"was killed by {sig.name}"


def likely_cause(code: int) -> str:
    """A short guess at why a signal ended the process, or "" for an ordinary exit code."""
    try:
        return _LIKELY.get(signal.Signals(-code), "") if code < 0 else ""
    except ValueError:
        return ""


def exit_finding(code: int) -> dict:
    """The engine's own exit as a finding (for the findings list and the session report), so a
    process that died without a traceback, e.g. under the OOM killer, is still explained."""
    cause = likely_cause(code)
    if code < 0:
        title = f"The engine {exit_text(code)}"
        fix = ("If it was out of memory: lower --mem-fraction or --max-running-requests (the Plan tab shows what "
               "fits), or check `dmesg` for the OOM killer; if it crashed in native code, run `bringup probe` and "
               "try --device cpu or BRINGUP_KERNELS=reference to isolate the kernel.")
    else:
        title = f"The engine {exit_text(code)}"
        fix = "Read the last lines of the log above; a traceback there is explained by its own finding."
    return {"code": "ENGINE_EXITED", "severity": "error", "title": title,
            "message": f"{title}{': ' + cause if cause else ''}.", "fix": fix, "layers": []}
