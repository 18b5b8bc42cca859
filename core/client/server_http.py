"""Talking to an engine over http or https, and saying in words why it did not answer."""

from __future__ import annotations

import http.client
import socket
import ssl
import urllib.error
import urllib.parse
import urllib.request


def split_base_url(base_url: str) -> urllib.parse.SplitResult:
    """The server's address; a clear ValueError for what is not an http(s) URL."""
    url = urllib.parse.urlsplit(base_url.strip())
    if url.scheme not in ("http", "https") or not url.hostname:
        raise ValueError(f"{base_url!r} is not a server address; use e.g. http://127.0.0.1:30000 or https://host:443")
    try:
        url.port
    except ValueError:
        raise ValueError(f"{base_url!r} has a port that is not a number") from None
    return url


def connection_for(base_url: str, timeout: float) -> http.client.HTTPConnection:
    """HTTPS (with the system's certificates) for https://, plain HTTP otherwise."""
    url = split_base_url(base_url)
    if url.scheme == "https":
        return http.client.HTTPSConnection(url.hostname, url.port or 443, timeout=timeout,
                                           context=ssl.create_default_context())
    return http.client.HTTPConnection(url.hostname, url.port or 80, timeout=timeout)


def get(base_url: str, path: str, api_key: str | None = None, timeout: float = 2.0) -> bytes:
    """GET base_url + path; raises OSError (urllib's errors are OSErrors) when it fails."""
    req = urllib.request.Request(base_url.rstrip("/") + path)
    if api_key:
        req.add_header("Authorization", f"Bearer {api_key}")
    with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 (the user's server)
        return resp.read()


def why_unreachable(err: BaseException) -> str:
    """'connection refused', 'HTTP 401: ... needs an API key', 'certificate verify failed', ..."""
    if isinstance(err, urllib.error.HTTPError):
        if err.code in (401, 403):
            return f"HTTP {err.code}: the server needs an API key (enter it in the Key field)"
        return f"HTTP {err.code} {err.reason}"
    reason = getattr(err, "reason", err)
    if isinstance(reason, ssl.SSLCertVerificationError):
        return f"its TLS certificate is not trusted here ({reason.verify_message})"
    if isinstance(reason, ssl.SSLError):
        return f"TLS failed ({reason.reason or reason}): is it really https?"
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused: nothing listens there"
    if isinstance(reason, (ConnectionResetError, ConnectionAbortedError, http.client.RemoteDisconnected)):
        return "the connection was dropped: the server went away"
    if isinstance(reason, (socket.timeout, TimeoutError)):
        return "no answer (timed out)"
    if isinstance(reason, socket.gaierror):
        return "unknown host name"
    return str(reason) or type(reason).__name__
