"""Before Qt starts: is there a display it can open a window on?

Without one, or without the X11 libraries its xcb plugin needs, Qt aborts the process (SIGABRT)
with advice to reinstall the application, which is not what is wrong. We check first and say what
to install or what to run instead. Only Qt's own imports are used: no torch on the start-up path.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# The Debian/Ubuntu packages with the libraries Qt 6's xcb plugin loads beyond libxcb itself.
XCB_PACKAGES = ("libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-image0 libxcb-render-util0 libxcb-shape0 "
                "libxcb-xkb1 libxkbcommon-x11-0")
NO_WINDOW = "or make a picture without a display: bringup gui --screenshot window.png"


def xcb_plugin() -> Path | None:
    """PySide6's X11 platform plugin, where the wheel puts it (None if this Qt is laid out otherwise)."""
    try:
        import PySide6
    except ImportError:
        return None
    path = Path(PySide6.__file__).parent / "Qt" / "plugins" / "platforms" / "libqxcb.so"
    return path if path.is_file() else None


def load_error(library: Path) -> str | None:
    """Why the dynamic loader cannot load `library` (e.g. 'libxcb-icccm.so.4: cannot open shared
    object file'), or None when it loads."""
    import ctypes

    try:
        ctypes.CDLL(str(library))
    except OSError as err:
        text = str(err)
        # glibc says "<library>: <dependency>: cannot open shared object file: ..."; keep the dependency part.
        return text.split(": ", 1)[1] if text.startswith(str(library) + ": ") else text
    return None


def display_problem(env: dict | None = None) -> str | None:
    """What keeps Qt from opening a window here, as a message that says what to do; None if nothing."""
    env = os.environ if env is None else env
    if not sys.platform.startswith("linux"):
        return None
    platform = env.get("QT_QPA_PLATFORM", "")
    if platform and not platform.startswith("xcb"):
        return None  # offscreen, wayland, vnc...: chosen on purpose
    if not platform and env.get("WAYLAND_DISPLAY"):
        return None
    if not env.get("DISPLAY"):
        return ("there is no display to open a window on (neither DISPLAY nor WAYLAND_DISPLAY is set); run it in a "
                f"desktop session or over ssh -X, {NO_WINDOW}")
    plugin = xcb_plugin()
    error = load_error(plugin) if plugin is not None else None
    if error:
        return (f"Qt's X11 plugin cannot load ({error}); install the X11 libraries Qt needs (Debian/Ubuntu: "
                f"apt-get install {XCB_PACKAGES}), {NO_WINDOW}")
    return None
