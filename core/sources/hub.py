"""Fetching a model's config.json from the Hugging Face hub (config only, through its cache).

huggingface_hub honours HF_HUB_OFFLINE, HF_HOME / HF_HUB_CACHE and the token from `hf auth login`
or HF_TOKEN. Each way this can fail becomes a UserError naming the id and what to do. The module
imports huggingface_hub only when called: `bringup inspect` on a local file never pays for it.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from bringup.core.errors import UserError

# owner/name with an optional @revision, as the hub spells repo ids.
HUB_ID = re.compile(r"^(?P<repo>[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96})(?:@(?P<rev>[\w./-]{1,200}))?$")


def looks_like_hub_id(text: str) -> bool:
    return bool(HUB_ID.match(text)) and ".." not in text and not text.endswith(".json")


def download_config(hub_id: str) -> Path:
    """Path of config.json in the local hub cache (downloaded if needed and allowed)."""
    match = HUB_ID.match(hub_id)
    if not match:
        raise UserError(f"{hub_id!r} is not a hub id; spell it owner/name, e.g. nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B")
    repo, revision = match["repo"], match["rev"]
    try:
        from huggingface_hub import hf_hub_download
        from huggingface_hub import errors as hf_errors
    except ImportError:  # pragma: no cover - a dependency of the project
        raise UserError("huggingface_hub is not installed; run `make run` or `pip install huggingface-hub`") from None
    # huggingface_hub retries network errors with backoff for ~25 s; when the hub cannot be reached
    # at all we go straight to the cache instead, so the window and the CLI answer at once.
    cache_only = _offline() or not hub_reachable()
    quiet = logging.getLogger("huggingface_hub")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        return Path(hf_hub_download(repo, "config.json", revision=revision, local_files_only=cache_only))
    except Exception as err:  # noqa: BLE001 - every failure becomes a message; see explain()
        raise explain(err, hub_id, hf_errors) from None
    finally:
        quiet.setLevel(level)


def hub_reachable(timeout: float = 3.0) -> bool:
    """A TCP connect to the hub endpoint (skipped behind a proxy, where only the proxy knows)."""
    import os
    import socket
    from urllib.parse import urlparse

    if any(os.environ.get(k) for k in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return True
    from huggingface_hub import constants

    url = urlparse(constants.ENDPOINT)
    try:
        with socket.create_connection((url.hostname or "huggingface.co", url.port or 443), timeout=timeout):
            return True
    except OSError:
        return False


def explain(err: Exception, hub_id: str, hf_errors) -> UserError:
    """The message for one hub failure; order matters (GatedRepoError is a RepositoryNotFoundError)."""
    if isinstance(err, hf_errors.GatedRepoError):
        return UserError(
            f"{hub_id} is gated: accept its licence on https://huggingface.co/{hub_id.split('@')[0]} "
            "and log in (`hf auth login` or HF_TOKEN), then retry"
        )
    if isinstance(err, hf_errors.RepositoryNotFoundError):
        return UserError(
            f"{hub_id} was not found on the Hugging Face hub (or it is private); check the spelling, "
            "or log in with `hf auth login` if it is private"
        )
    if isinstance(err, hf_errors.RevisionNotFoundError):
        return UserError(f"{hub_id}: that revision does not exist; check the part after '@' or drop it")
    if isinstance(err, hf_errors.OfflineModeIsEnabled) or (
        isinstance(err, hf_errors.LocalEntryNotFoundError) and _offline()
    ):
        return UserError(
            f"{hub_id}: config.json is not in the local Hugging Face cache and HF_HUB_OFFLINE is set; "
            "unset HF_HUB_OFFLINE to download it, or pass a local config.json or model folder"
        )
    if isinstance(err, hf_errors.LocalEntryNotFoundError):
        return UserError(
            f"{hub_id}: could not reach the Hugging Face hub and config.json is not cached; check the network "
            "(or proxy, HF_ENDPOINT), or pass a local config.json or model folder"
        )
    if isinstance(err, (hf_errors.EntryNotFoundError, hf_errors.RemoteEntryNotFoundError)):
        return UserError(f"{hub_id} has no config.json; it may not be a transformers model. Pick the model's main repository")
    if isinstance(err, hf_errors.HFValidationError):
        return UserError(f"{hub_id!r} is not a valid hub id ({err}); spell it owner/name")
    if isinstance(err, hf_errors.HfHubHTTPError):
        status = getattr(getattr(err, "response", None), "status_code", None)
        if status in (401, 403):
            return UserError(f"{hub_id}: the hub refused access (HTTP {status}); log in with `hf auth login` or set HF_TOKEN")
        return UserError(f"{hub_id}: the hub answered with an error ({_first_line(err)}); retry later")
    if isinstance(err, (OSError, TimeoutError)) or type(err).__module__.startswith(("httpx", "httpcore", "requests", "urllib3")):
        return UserError(
            f"{hub_id}: network error while fetching config.json ({_first_line(err)}); check the connection "
            "(or proxy, HF_ENDPOINT), or pass a local config.json or model folder"
        )
    return UserError(f"{hub_id}: fetching config.json failed ({type(err).__name__}: {_first_line(err)}); retry, or pass a local file")


def _offline() -> bool:
    import os

    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        return True
    try:
        from huggingface_hub import constants

        return bool(constants.HF_HUB_OFFLINE)
    except Exception:  # noqa: BLE001
        return False


def _first_line(err: Exception) -> str:
    text = str(err).strip().splitlines()
    return text[0][:200] if text else type(err).__name__
