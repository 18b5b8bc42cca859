"""`default` as a model source: the bundled checkpoint that `serve`, `bench` and the Run tab load.

`inspect default` (and the window's model bar) read the cached checkpoint's config.json, so that
the map shown is the model that the engine serves. The cache is usually there already; when it is
not, it is built once in a child process, so that the caller (the window, `inspect`) never imports
torch itself.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bringup.core.errors import UserError

_BUILD = "from bringup.core.engine.default_model import ensure_default_checkpoint; ensure_default_checkpoint()"


def is_default_name(text: str) -> bool:
    """True when `text` (non-empty) names the default model, as `bringup serve` reads it."""
    from bringup.core.engine.default_model import is_default

    return bool(text.strip()) and is_default(text)


def default_checkpoint_folder(progress=None) -> Path:
    """The cached default checkpoint's folder, built first (in a child process) if missing."""
    from bringup.core.engine.default_model import checkpoint_dir, is_complete

    folder = checkpoint_dir()
    if is_complete(folder):
        return folder
    message = f"building the default model into {folder} (first use only, a few seconds)"
    if progress is not None:
        progress(message)
    else:  # a command line: say why it pauses, on stderr so that --json output stays one document
        print(message, file=sys.stderr)
    done = subprocess.run([sys.executable, "-c", _BUILD], capture_output=True, text=True)
    if done.returncode != 0 or not is_complete(folder):
        tail = (done.stderr.strip().splitlines() or ["no error output"])[-1]
        raise UserError(f"could not build the default model into {folder} ({tail}); "
                        "check that torch and transformers are installed and the cache folder is writable")
    return folder


def sglang_model_path(source: str) -> str:
    """SGLang knows no 'default': hand it the bundled checkpoint's folder (where `bringup serve
    default` writes it) instead; any other source as it is."""
    if not is_default_name(source):
        return source
    from bringup.core.engine.default_model import checkpoint_dir

    return str(checkpoint_dir())
