"""An attach URL's API key in the system keyring, only when the user ticks "Remember" and the
`keyring` package is installed (`pip install keyring`). Nothing here writes the key anywhere else."""

from __future__ import annotations

import importlib.util

SERVICE = "io.github.bringup.Workbench"


def keyring_available() -> bool:
    return importlib.util.find_spec("keyring") is not None


def recall(url: str) -> str | None:
    if not keyring_available():
        return None
    import keyring
    from keyring.errors import KeyringError

    try:
        return keyring.get_password(SERVICE, url)
    except KeyringError:
        return None


def remember(url: str, key: str) -> str:
    """'' when stored, else why not (no backend, locked...)."""
    if not keyring_available():
        return "the keyring package is not installed (pip install keyring)"
    import keyring
    from keyring.errors import KeyringError

    try:
        keyring.set_password(SERVICE, url, key)
    except KeyringError as err:
        return f"the system keyring refused it: {err}"
    return ""


def forget(url: str) -> None:
    if not keyring_available():
        return
    import keyring
    from keyring.errors import KeyringError, PasswordDeleteError

    try:
        keyring.delete_password(SERVICE, url)
    except (PasswordDeleteError, KeyringError):
        pass
