"""A service's Prometheus scrape endpoint (``GET /metrics``) as an HTTP door like the gateways:
the same Host and Origin checks (a page in the user's browser, or a DNS-rebinding one, cannot
read the counters), the same connection limits and timeouts, and a bearer token when one is
configured."""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
from collections.abc import Sequence

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
from starlette.types import Receive, Scope, Send

from hookmesh.metrics import install_for_otlp, install_meter_provider
from hookmesh.server._auth import parse_tokens
from hookmesh.server._http import HttpServer
from hookmesh.server._http_errors import HttpRefusal, send_refusal
from hookmesh.server._http_settings import HttpGatewaySettings

log = logging.getLogger("hookmesh.metrics")

PATH = "/metrics"


class _MetricsApp:
    """Answers ``GET /metrics`` with the process's metrics in Prometheus' text format.

    Args:
        tokens: Accepted ``Bearer`` header values; empty: no token is asked for.
    """

    def __init__(self, tokens: Sequence[bytes]) -> None:
        self._tokens = list(tokens)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            self._check(scope)
        except HttpRefusal as refusal:
            await send_refusal(send, refusal, close=False)
            return
        # Collecting reads every instrument: off the event loop, which serves the RPCs.
        body = await asyncio.to_thread(generate_latest, REGISTRY)
        headers = [
            (b"content-type", CONTENT_TYPE_LATEST.encode()),
            (b"content-length", str(len(body)).encode()),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send(
            {"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body}
        )

    def _check(self, scope: Scope) -> None:
        """Refuse anything but an authorised ``GET /metrics``.

        Raises:
            HttpRefusal: 404, 405, or 401 (no or a wrong ``authorization`` header; several
                are refused in front, by `HttpGuard`).
        """
        if scope["path"] != PATH:
            raise HttpRefusal(404, "NOT_FOUND", f"this endpoint serves only GET {PATH}")
        if scope["method"] not in ("GET", "HEAD"):
            raise HttpRefusal(405, "METHOD_NOT_ALLOWED", f"{PATH} answers GET only")
        if not self._tokens:
            return
        given = [value for name, value in scope["headers"] if name == b"authorization"]
        if not given:
            raise HttpRefusal(
                401,
                "CREDENTIALS_REQUIRED",
                "this endpoint requires 'authorization: Bearer <token>'",
            )
        # NOTE(metrics): compare with every token, so timing does not reveal which one.
        found = False
        for expected in self._tokens:
            found |= hmac.compare_digest(given[0], expected)
        if not found:
            raise HttpRefusal(401, "INVALID_TOKEN", "the bearer token is not valid")


def _tokens(token_env: str | None) -> list[bytes]:
    """The ``Bearer`` header values `token_env` names (entries as in `AuthConfig.token_env`).

    Raises:
        ValueError: The variable is unset or holds no token (never quoting one).
    """
    if not token_env:
        return []
    text = os.environ.get(token_env)
    if not text:
        raise ValueError(f"metrics_token_env {token_env} is not set")
    return [
        f"Bearer {token}".encode() for token in parse_tokens(text, f"metrics_token_env {token_env}")
    ]


class MetricsDoor:
    """A running scrape endpoint.

    Args:
        server: The HTTP server serving it.
    """

    def __init__(self, server: HttpServer) -> None:
        self._server = server
        self.port = server.port
        """The bound port (the OS picks one for port 0)."""

    async def stop(self) -> None:
        """Stop serving; a scrape in flight gets a second to finish."""
        await self._server.stop(1)


async def start_metrics(
    listen: str, *, allowed_hosts: Sequence[str] = (), token_env: str | None = None
) -> MetricsDoor | None:
    """What a service does at start: serve the endpoint at `listen` (installing the meter
    provider, see `install_meter_provider`), or, with `listen` empty, install the provider
    only when the OTLP variables ask for an export.

    Args:
        listen: ``host:port`` (port 0 lets the OS pick); empty for no endpoint.
        allowed_hosts: Host headers accepted beyond the loopback ones (as a gateway's
            `allowed_hosts`): Prometheus sends the address it scrapes.
        token_env: Environment variable holding the tokens a scrape must send as
            ``authorization: Bearer``; None: no token is asked for.

    Raises:
        ValueError: `listen` is not ``host:port``, or `token_env` is unset or malformed.
        OSError: The port is taken.
    """
    if not listen:
        install_for_otlp()
        return None
    tokens = _tokens(token_env)
    install_meter_provider()
    settings = HttpGatewaySettings.model_construct(allowed_hosts=list(allowed_hosts))
    server = HttpServer(_MetricsApp(tokens), listen, settings)
    await server.start()
    log.info("metrics endpoint on http://%s%s", listen.rpartition(":")[0], f":{server.port}{PATH}")
    return MetricsDoor(server)
