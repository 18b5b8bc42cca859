"""Who may talk to the server: the Host header (DNS rebinding) and the API key.

A web page the user visits can make the browser send requests to 127.0.0.1; two defaults stop it
from driving the engine. Bodies must be `application/json` (a page can only send text/plain or
form data without a CORS preflight, which we never grant), checked in the handlers; and the Host
header must name this server: a rebinding attack reaches us under the attacker's domain name, so
a name we were not told about is refused. An IP literal cannot be rebound and is always accepted.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import os
import socket
from pathlib import Path

from bringup.core.errors import UserError

from .protocol import error_body

# Paths served without the API key: liveness must be checkable by anyone on the machine.
OPEN_PATHS = frozenset({"/health", "/ready"})
API_KEY_ENV = "BRINGUP_API_KEY"
_WILDCARDS = ("0.0.0.0", "::", "")


def resolve_api_key(flag: str | None, key_file: str | None, environ=os.environ) -> str | None:
    """The key from --api-key, else --api-key-file, else $BRINGUP_API_KEY (the last two stay out of `ps`)."""
    if flag is not None:
        return flag
    if key_file is not None:
        try:
            key = Path(key_file).read_text(encoding="utf-8").strip()
        except OSError as err:
            raise UserError(f"cannot read --api-key-file {key_file}: {err.strerror or err}") from None
        if not key:
            raise UserError(f"--api-key-file {key_file} is empty; put the key on its first line")
        return key
    key = environ.get(API_KEY_ENV, "").strip()
    return key or None


def allowed_host_names(bind_host: str, extra: list[str] | tuple[str, ...] = ()) -> frozenset[str] | None:
    """Host names (not IPs) accepted in the Host header; None means any (`--allowed-hosts '*'`)."""
    if "*" in extra:
        return None
    names = {"localhost", *(h.lower() for h in extra)}
    if bind_host not in ("127.0.0.1", "::1", "localhost"):  # reachable from outside: this machine's names
        names.add(bind_host.lower())
        if bind_host in _WILDCARDS or not _is_ip(bind_host):
            names.update({socket.gethostname().lower(), socket.getfqdn().lower()})
    return frozenset(names)


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def host_of(header: str) -> str:
    """'name:port' / '[::1]:port' / 'name' -> the name or address, lowercase."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def host_allowed(header: str | None, names: frozenset[str] | None) -> bool:
    if names is None or header is None:  # no Host header: not a browser (HTTP/1.0 tools)
        return True
    host = host_of(header).rstrip(".")
    return _is_ip(host) or host in names


def bearer_token(header: bytes) -> bytes | None:
    """The token of 'Bearer TOKEN', with the scheme matched case-insensitively (RFC 7235)."""
    scheme, _, token = header.strip().partition(b" ")
    if scheme.lower() != b"bearer":
        return None
    return token.strip()


class AccessGuard:
    """Plain ASGI (not BaseHTTPMiddleware), so streaming and disconnects pass through untouched."""

    def __init__(self, app, *, api_key: str | None, host_names: frozenset[str] | None, on_reject=None):
        self.app = app
        self.expected = api_key.encode() if api_key else None
        self.host_names = host_names
        self.on_reject = on_reject

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        host = headers.get(b"host")
        if not host_allowed(host.decode("latin-1") if host is not None else None, self.host_names):
            return await self._refuse(send, 400, f"the Host header {host.decode('latin-1')!r} does not name this "
                                      "server; use its address, or start it with --allowed-hosts NAME")
        if self.expected is None or scope.get("path") in OPEN_PATHS:
            return await self.app(scope, receive, send)
        given = bearer_token(headers.get(b"authorization", b""))
        if given is not None and hmac.compare_digest(given, self.expected):
            return await self.app(scope, receive, send)
        await self._refuse(send, 401, "missing or wrong API key; send the header 'Authorization: Bearer <key>' "
                           "with the server's key (--api-key, --api-key-file or $" + API_KEY_ENV + ")",
                           [(b"www-authenticate", b"Bearer")])

    async def _refuse(self, send, status: int, message: str, headers=()) -> None:
        if self.on_reject:
            self.on_reject()
        body = json.dumps(error_body(message, status)).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                *headers]})
        await send({"type": "http.response.body", "body": body})
