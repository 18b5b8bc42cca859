"""The record a window keeps of each engine it starts, and the proof a later window asks of it before
it offers to end that engine.

A record under the cache dir is only a claim: the pid in it may since have gone to another program,
and anyone who can write the folder can plant one. So a record is believed only when everything in
it matches the live process: its start time (a reused pid has another), its exact command line (one
of the engine commands the window runs), and, where the process listens, the recorded port, whose
`/health` must answer as a bringup engine with that pid. A record that fails is removed, and the
reason is kept as a note for the window to show; its process is never touched. Only a group the
window created (the engine leads its own session) is signalled as a group.
"""

from __future__ import annotations

import json
import os
import stat
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from bringup.core.client.process_tree import end_tree

# `bringup serve` names its pid in this header on every /health answer (core/serve/server.py).
HEALTH_PID_HEADER = "X-Bringup-Engine-Pid"
RECORD_VERSION = 2
MAX_RECORD_BYTES = 64 * 1024  # a record is a few hundred bytes; anything larger is not ours
START_TIME_SLACK_S = 0.05  # psutil's start time is exact to the clock tick for one process


def engines_dir() -> Path:
    """`$BRINGUP_ENGINES_DIR`, else `$XDG_CACHE_HOME/bringup/engines` (~/.cache/bringup/engines)."""
    explicit = os.environ.get("BRINGUP_ENGINES_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "bringup" / "engines"


@dataclass
class EngineRecord:
    """What the pid file says about one engine the window started."""

    pid: int
    created: float  # the engine's process start time: a reused pid is not our engine
    url: str
    argv: list[str]  # as the window ran it, keys hidden (redact_argv)
    parent_pid: int
    parent_created: float
    own_group: bool = False  # the engine led its own session when recorded: its group is ours to end
    path: Path | None = None

    @property
    def port(self) -> int | None:
        tail = self.url.rsplit(":", 1)[-1].split("/")[0]
        return int(tail) if tail.isdigit() else None

    def describe(self) -> str:
        started = time.strftime("%Y-%m-%d %H:%M", time.localtime(self.created))
        return f"pid {self.pid}, {self.url}, started {started}"


@dataclass
class RecordScan:
    """Leftover engines proved to be ours, and what was removed on the way (with why)."""

    found: list[EngineRecord] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def record_engine(pid: int, url: str, argv: list[str]) -> Path | None:
    """Write the engine's pid file, owner-only and atomically; None when the cache dir is not writable."""
    try:
        proc, me = psutil.Process(pid), psutil.Process()
        own_group = os.getpgid(pid) == pid and os.getsid(pid) == pid
        body = {"version": RECORD_VERSION, "pid": pid, "created": proc.create_time(), "url": url,
                "argv": redact_argv(argv), "own_group": own_group,
                "parent_pid": me.pid, "parent_created": me.create_time()}
        folder = engines_dir()
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = folder / f"{pid}.json"
        _write_private(path, json.dumps(body).encode("utf-8"))
        return path
    except (OSError, psutil.Error):
        return None


def forget_engine(pid: int | None) -> None:
    if pid is not None:
        _unlink(engines_dir() / f"{pid}.json")


def scan_records() -> RecordScan:
    """Engines from earlier sessions that still run although the window that started them is gone,
    each proved to be the engine its record names. Records of engines that ended are removed
    quietly (a clean end leaves none, a crash may); records that fail the proof are removed with a note."""
    scan = RecordScan()
    folder = engines_dir()
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        rec, why = read_record(path)
        if rec is None:
            _unlink(path)
            scan.notes.append(f"Removed {path}: {why}; nothing was ended.")
            continue
        if not _alive(rec.pid, rec.created):
            _unlink(path)  # the engine ended; its record is what a crash leaves behind
            continue
        if _alive(rec.parent_pid, rec.parent_created):
            continue  # a window that is still open owns it (a second window on this machine)
        why = disproof(rec)
        if why is None:
            scan.found.append(rec)
        else:
            _unlink(path)
            scan.notes.append(f"Removed the record {path.name}: {why}. That process was left alone.")
    return scan


def leftover_engines() -> list[EngineRecord]:
    return scan_records().found


def read_record(path: Path) -> tuple[EngineRecord | None, str]:
    """The record in `path`, or None and why it cannot be one of ours (another owner, open to
    others, not a plain file, too large, not a record)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as err:
        return None, f"it cannot be opened as a plain file ({err.strerror})"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None, "it is not a plain file"
        if hasattr(os, "getuid") and st.st_uid != os.getuid():
            return None, f"it belongs to user id {st.st_uid}, not to you"
        if st.st_mode & 0o077:
            return None, f"others may write or read it (mode {stat.S_IMODE(st.st_mode):o}; the window writes 600)"
        if st.st_size > MAX_RECORD_BYTES:
            return None, f"it holds {st.st_size} bytes, far more than a record"
        raw = os.read(fd, MAX_RECORD_BYTES + 1)
    finally:
        os.close(fd)
    try:
        data = json.loads(raw.decode("utf-8"))
        if data.get("version") != RECORD_VERSION:
            return None, "it was written by an older window, without what proves its engine"
        rec = EngineRecord(int(data["pid"]), float(data["created"]), str(data["url"]),
                           [str(a) for a in data["argv"]], int(data["parent_pid"]),
                           float(data["parent_created"]), bool(data["own_group"]), path)
    except (UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError):
        return None, "it is not a readable engine record (half-written or foreign)"
    return rec, ""


def disproof(rec: EngineRecord) -> str | None:
    """Why the live process is not the engine `rec` names, or None when everything matches."""
    try:
        proc = psutil.Process(rec.pid)
        if abs(proc.create_time() - rec.created) > START_TIME_SLACK_S:
            return f"pid {rec.pid} started at another time than the engine it names (the pid was reused)"
        cmdline = proc.cmdline()
        listening = _listening_ports(proc)
    except psutil.Error as err:
        return f"pid {rec.pid} cannot be inspected ({type(err).__name__})"
    if not is_engine_command(rec.argv):
        return f"its command `{_shown(rec.argv)}` is not one the window starts engines with"
    if not cmdline:  # mid-exec, a zombie or a kernel thread: nothing proves it is the engine
        return (f"pid {rec.pid} shows no command line (it is starting, ending or not a program), "
                f"so it is not proved to be the engine it names (`{_shown(rec.argv)}`)")
    if not same_command(redact_argv(cmdline), rec.argv):
        return f"pid {rec.pid} runs `{_shown(cmdline)}`, not the engine it names (`{_shown(rec.argv)}`)"
    if listening:
        if rec.port not in listening:
            return f"pid {rec.pid} listens on {sorted(listening)}, not on the recorded port {rec.port}"
        if _is_bringup_command(rec.argv) and _health_pid(rec) != rec.pid:
            return f"port {rec.port} does not answer /health as the bringup engine with pid {rec.pid}"
    return None


def end_leftover(rec: EngineRecord, timeout: float = 5.0) -> bool:
    """End a leftover engine and everything it started; True when it is gone.

    The record is proved again first (the user may answer long after the offer, and the pid may
    have passed on meanwhile): a process that no longer matches is left alone and False returned.
    The group is signalled only when the engine still leads the session the window gave it."""
    if _alive(rec.pid, rec.created):
        if disproof(rec) is not None:
            return False
        end_tree(rec.pid, timeout, group=rec.own_group and _leads_own_session(rec.pid))
    gone = not _alive(rec.pid, rec.created)
    if gone and rec.path is not None:
        _unlink(rec.path)
    return gone


def _leads_own_session(pid: int) -> bool:
    try:
        return os.getpgid(pid) == pid and os.getsid(pid) == pid
    except OSError:
        return False


def same_command(live: list[str], recorded: list[str]) -> bool:
    """The live command line is the recorded one, or the recorded script run by its shebang's
    interpreter (`/venv/bin/vllm serve` shows as `/venv/bin/python /venv/bin/vllm serve`)."""
    if live == recorded:
        return True
    return (len(live) == len(recorded) + 1 and bool(recorded) and Path(live[0]).name.startswith("python")
            and live[2:] == recorded[1:] and os.path.realpath(live[1]) == os.path.realpath(recorded[0]))


def is_engine_command(argv: list[str]) -> bool:
    """One of the commands core/launch builds: `bringup serve`, SGLang's launch_server, `vllm serve`."""
    return _is_bringup_command(argv) or _after_python(argv, ["-m", "sglang.launch_server"]) or (
        len(argv) >= 2 and Path(argv[0]).name == "vllm" and argv[1] == "serve") or (
        _after_python(argv, ["-m", "vllm.entrypoints.cli.main", "serve"]))


def _is_bringup_command(argv: list[str]) -> bool:
    return _after_python(argv, ["-m", "bringup", "serve"]) or (
        len(argv) >= 2 and Path(argv[0]).name == "bringup" and argv[1] == "serve")


def _after_python(argv: list[str], head: list[str]) -> bool:
    return len(argv) >= 1 + len(head) and Path(argv[0]).name.startswith("python") and argv[1:1 + len(head)] == head


def _listening_ports(proc: psutil.Process) -> set[int]:
    try:
        conns = proc.net_connections(kind="tcp") if hasattr(proc, "net_connections") else proc.connections("tcp")
    except psutil.AccessDenied:
        return set()
    return {c.laddr.port for c in conns if c.status == psutil.CONN_LISTEN and c.laddr}


def _health_pid(rec: EngineRecord) -> int | None:
    """The pid the engine at the recorded port names in its /health answer (any status), or None."""
    host = rec.url.split("://", 1)[-1].rsplit(":", 1)[0] or "127.0.0.1"
    url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{rec.port}/health"
    try:
        with urllib.request.urlopen(url, timeout=2.0) as resp:
            value = resp.headers.get(HEALTH_PID_HEADER)
    except urllib.error.HTTPError as err:  # 503 while starting or draining still names the engine
        value = err.headers.get(HEALTH_PID_HEADER)
    except (OSError, ValueError):
        return None
    return int(value) if value and value.isdigit() else None


def _alive(pid: int, created: float) -> bool:
    try:
        p = psutil.Process(pid)
        return abs(p.create_time() - created) <= START_TIME_SLACK_S and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _write_private(path: Path, data: bytes) -> None:
    """Write `data` to `path` readable by the owner only; a reader sees the old file or the whole new one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        os.fchmod(fd, 0o600)  # O_CREAT's mode is masked by umask, and an old tmp keeps its mode
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def _shown(argv: list[str], limit: int = 120) -> str:
    text = " ".join(argv)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def redact_argv(argv: list[str]) -> list[str]:
    """argv with the value after --api-key hidden: pid files and logs never hold the key."""
    out, hide = [], False
    for arg in argv:
        if hide:
            out.append("***")
            hide = False
        elif arg.startswith("--api-key="):
            out.append("--api-key=***")
        else:
            out.append(arg)
            hide = arg == "--api-key"
    return out
