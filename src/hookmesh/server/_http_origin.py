"""Who may reach an HTTP gateway from a browser: the Host check (DNS rebinding) and the Origin
check (cross-origin pages), both on by default."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from urllib.parse import urlsplit

from hookmesh.server._http_errors import HttpRefusal

_DEFAULT_PORTS = {"http": 80, "https": 443}


def _split_host(host: str) -> tuple[str, int | None] | None:
    """``name[:port]`` or ``[v6]:port`` as (lower-case name, port); None when malformed."""
    try:
        parts = urlsplit(f"//{host}")
        name, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not name or parts.username is not None or parts.path or parts.query:
        return None
    return name.lower(), port


def _is_loopback(name: str) -> bool:
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class OriginPolicy:
    """The Host and Origin rules of one gateway.

    Host: a loopback name (``localhost``, ``127.0.0.1``, ``[::1]``, any port) or one of
    `allowed_hosts` (``name`` for any port, ``name:port`` exactly, ``*`` for any); anything
    else is 421. Origin: absent (not a browser, or a same-origin navigation), the gateway's
    own (same host and port as the Host header: its chat page), or one of `cors_origins`
    (``*`` for any); anything else, ``null`` included, is 403.

    Args:
        allowed_hosts: Host headers accepted beyond loopback.
        cors_origins: Origins that may call from another origin.
    """

    def __init__(self, allowed_hosts: Sequence[str], cors_origins: Sequence[str]) -> None:
        self._any_host = "*" in allowed_hosts
        self._hosts = {h.lower() for h in allowed_hosts if h != "*"}
        self._any_origin = "*" in cors_origins
        self._origins = {o.rstrip("/").lower() for o in cors_origins if o != "*"}

    def check(self, host: str | None, origin: str | None) -> None:
        """Refuse a request whose headers say a browser page should not reach it.

        Raises:
            HttpRefusal: 421 ``HOST_NOT_ALLOWED`` or 403 ``ORIGIN_NOT_ALLOWED``.
        """
        split = _split_host(host) if host else None
        if not self._host_allowed(host, split):
            raise HttpRefusal(
                421,
                "HOST_NOT_ALLOWED",
                "this gateway does not answer for that Host header; add it to allowed_hosts",
            )
        if origin is not None and not self._origin_allowed(origin, split):
            raise HttpRefusal(
                403,
                "ORIGIN_NOT_ALLOWED",
                "requests from this web origin are not allowed; add it to cors_origins",
            )

    def cross_origin(self, origin: str) -> bool:
        """Whether `origin` is a configured cross-origin caller (CORS headers apply)."""
        return self._any_origin or origin.rstrip("/").lower() in self._origins

    def _host_allowed(self, host: str | None, split: tuple[str, int | None] | None) -> bool:
        if self._any_host:
            return True
        if host is None or split is None:
            return False
        name, port = split
        return (
            _is_loopback(name)
            or name in self._hosts
            or (port is not None and f"{name}:{port}" in self._hosts)
        )

    def _origin_allowed(self, origin: str, host: tuple[str, int | None] | None) -> bool:
        if self.cross_origin(origin):
            return True
        try:
            parts = urlsplit(origin)
            name, port = parts.hostname, parts.port
        except ValueError:
            return False
        default = _DEFAULT_PORTS.get(parts.scheme)
        if host is None or not name or default is None:
            return False
        host_name, host_port = host
        return name.lower() == host_name and (port or default) == (host_port or default)
