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
