"""An ASGI app served by uvicorn inside the running event loop, behind the checks every HTTP
gateway shares (AG-UI, A2A, MCP), stopped on request."""

from __future__ import annotations

import asyncio
import math
import socket
from typing import Any

import uvicorn

from hookmesh.server._http_guard import HttpGuard
from hookmesh.server._http_protocol import protocol_for
from hookmesh.server._http_settings import HttpGatewaySettings


def _bind(address: str) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0 picks a free one)."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"listen address {address!r} is not host:port")
    host = host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, int(port)))
        sock.listen(128)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


class HttpServer:
    """uvicorn serving `app` in this process: no signal handlers of its own (the caller
    owns shutdown), bound before it starts so a taken port fails here with OSError.

    Every request passes `HttpGuard` (Host, Origin, CORS, JSON bodies within their limits)
    and every connection `GuardedProtocol` (header deadline, connection cap), both set by
    `settings` (docs/security.md).

    Args:
        app: The ASGI application.
        address: ``host:port``.
        settings: The gateway's hosts, origins and limits.
        lifespan: Run the app's lifespan (startup before serving, shutdown after).
    """

    def __init__(
        self, app: Any, address: str, settings: HttpGatewaySettings, *, lifespan: bool = False
    ) -> None:
        self._socket = _bind(address)
        self.port: int = self._socket.getsockname()[1]
        self._config = uvicorn.Config(
            HttpGuard(app, settings),
            http=protocol_for(settings),
            lifespan="on" if lifespan else "off",
            log_config=None,
            access_log=False,
            ws="none",
            h11_max_incomplete_event_size=settings.max_header_bytes,
        )
        self._config.load()
        self._server = uvicorn.Server(self._config)
        # NOTE(hookmesh): Server.serve() would install its own SIGINT/SIGTERM handlers; the
        # steps it runs are taken one by one instead, so the caller's handlers stay in place.
        self._server.lifespan = self._config.lifespan_class(self._config)
        self._loop_task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Accept connections."""
        await self._server.startup(sockets=[self._socket])
        self._loop_task = asyncio.create_task(self._server.main_loop())

    async def stop(self, grace: float | None) -> None:
        """Stop accepting, give open requests `grace` seconds, then cancel them."""
        self._server.should_exit = True
        if self._loop_task is not None:
            await self._loop_task
        self._config.timeout_graceful_shutdown = math.ceil(grace or 0)
        await self._server.shutdown(sockets=[self._socket])
