"""`default` as a model source: the bundled checkpoint that `serve`, `bench` and the Run tab load.

`inspect default` (and the window's model bar) read the cached checkpoint's config.json, so that
the map shown is the model that the engine serves. The cache is usually there already; when it is
not, it is built once in a child process, so that the caller (the window, `inspect`) never imports
torch itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bringup.core.errors import UserError

# The default checkpoint's identity: its name, the names that mean it, and where it lives. The engine
# reads these too (core/sources/default_model.py generates the checkpoint; sources never import it).
DEFAULT_CHECKPOINT_NAME = "nemotron-3-nano-pattern-tiny"
DEFAULT_ALIASES = ("default", DEFAULT_CHECKPOINT_NAME)  # what `bringup serve default` accepts
RECIPE_VERSION = 1  # bumped when the recipe changes, so that an old cached folder is not reused by mistake
CHECKPOINT_FILES = ("config.json", "model.safetensors", "tokenizer.json")

# Builds the checkpoint in a child process (it needs torch; the caller may be the window).
_BUILD = "from bringup.core.sources.default_model import ensure_default_checkpoint; ensure_default_checkpoint()"


def cache_root() -> Path:
    """`$XDG_CACHE_HOME/bringup/models`, else `~/.cache/bringup/models`."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "bringup" / "models"


def checkpoint_dir(variant: str | None = None, root: Path | None = None) -> Path:
    """The default checkpoint's folder; `variant` (a recipe fingerprint) names a non-default build."""
    root = Path(root) if root is not None else cache_root()
    name = f"{DEFAULT_CHECKPOINT_NAME}-v{RECIPE_VERSION}"
    return root / (f"{name}-{variant}" if variant else name)


def is_complete(folder: Path) -> bool:
    return all((folder / f).is_file() for f in CHECKPOINT_FILES)


def is_default(source: str | None) -> bool:
    """True when `source` names the default model: None, "" or one of DEFAULT_ALIASES."""
    return source is None or source.strip() == "" or source.strip().lower() in DEFAULT_ALIASES


def is_default_name(text: str) -> bool:
    """True when `text` (non-empty) names the default model, as `bringup serve` reads it."""
    return bool(text.strip()) and is_default(text)


def default_checkpoint_folder(progress=None) -> Path:
    """The cached default checkpoint's folder, built first (in a child process) if missing."""
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
    return str(checkpoint_dir())
