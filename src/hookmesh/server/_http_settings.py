"""What every HTTP gateway's configuration shares: who may call it from a browser, and the
limits that keep one client from exhausting it (docs/security.md, "The HTTP doors")."""

from __future__ import annotations

from pydantic import Field

from hookmesh.server._settings import ServiceSettings


class HttpGatewaySettings(ServiceSettings):
    """Base of the AG-UI, A2A and MCP gateways' configs. Every default is safe on one machine:
    only loopback Host names, no cross-origin caller, bounded bodies, timeouts on slow
    clients, a cap on connections."""

    allowed_hosts: list[str] = Field(default_factory=list)
    """Host headers accepted beyond the loopback ones (``localhost``, ``127.0.0.1``, ``[::1]``,
    any port): ``agent.example`` (any port) or ``agent.example:8443``; ``*`` accepts any
    (behind a proxy that checks Host itself). A foreign Host gets 421: it is how a DNS
    rebinding page would reach a local gateway."""
    cors_origins: list[str] = Field(default_factory=list)
    """Web origins (``https://app.example``) that may call from another origin, with CORS
    headers; ``*`` for any. None by default: a request with a foreign ``Origin`` gets 403,
    so a page in the user's browser cannot drive the gateway."""
    max_request_bytes: int = Field(1024 * 1024, ge=1024, le=256 * 1024 * 1024)
    """Largest request body; larger ones get 413 (``REQUEST_TOO_LARGE``)."""
    max_json_depth: int = Field(64, ge=2, le=512)
    """Deepest nesting of arrays and objects in a JSON body (413 ``JSON_TOO_DEEP``)."""
    max_json_items: int = Field(1000, ge=1, le=1_000_000)
    """Most items in one JSON array or object: messages per run, parts per message, keys per
    map (413 ``TOO_MANY_ITEMS``)."""
    max_header_bytes: int = Field(16 * 1024, ge=1024, le=1024 * 1024)
    """Largest request line plus headers (431 ``HEADERS_TOO_LARGE``)."""
    header_timeout: float = Field(10.0, gt=0, le=3600)
    """Seconds a client has to send a request's headers, from its first byte (or from the
    connection's start); then 408 and the connection closes (slowloris)."""
    body_timeout: float = Field(30.0, gt=0, le=3600)
    """Seconds a client has to send a request's whole body (408 ``REQUEST_TIMEOUT``)."""
    idle_timeout: float = Field(5.0, gt=0, le=3600)
    """Seconds a keep-alive connection may stay idle between requests before it is closed."""
    max_connections: int = Field(100, ge=1, le=100_000)
    """Open connections at most; one more is answered 503 (``TOO_MANY_CONNECTIONS``) and
    closed. Buffered bodies stay below ``max_connections * max_request_bytes``."""
