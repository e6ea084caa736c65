"""uvicorn's HTTP/1.1 protocol with the connection limits it lacks: a deadline on a request's
headers (slowloris), a cap on open connections, and JSON answers (431 for oversized headers)
where it would answer plain text 400."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from hookmesh.server._http_errors import raw_response
from hookmesh.server._http_linger import LingeringTransport
from hookmesh.server._http_settings import HttpGatewaySettings


class _Connection(h11.Connection):
    """h11's connection, remembering the status its last protocol error suggests (uvicorn
    drops it and answers 400 to everything)."""

    error_status = 400

    def next_event(self) -> Any:
        try:
            return super().next_event()
        except h11.RemoteProtocolError as exc:
            self.error_status = exc.error_status_hint
            raise


class GuardedProtocol(H11Protocol):
    """One connection. Its header deadline starts at the connection (a client that never
    speaks) and at the first byte of each later request (idle keep-alive time is uvicorn's
    own `idle_timeout`), and ends when the request line and headers are in; trickling bytes
    does not extend it. `settings` is set on a subclass per server (`protocol_for`)."""

    settings: ClassVar[HttpGatewaySettings]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.conn = self._h11 = _Connection(h11.SERVER, self.settings.max_header_bytes)
        self.timeout_keep_alive = self.settings.idle_timeout  # type: ignore[assignment]
        self._header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._lingering = LingeringTransport(transport, self.loop)
        super().connection_made(self._lingering)
        limit = self.settings.max_connections
        if len(self.connections) > limit:
            self._refuse(503, "TOO_MANY_CONNECTIONS", f"the gateway serves {limit} connections")
            return
        self._watch_headers()

    def data_received(self, data: bytes) -> None:
        if self._lingering.lingering:
            return  # the rest of a refused request: dropped
        super().data_received(data)
        self._watch_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_header_timer()
        self._lingering.closed()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        if self._h11.error_status == 431:
            limit = self.settings.max_header_bytes
            self._refuse(431, "HEADERS_TOO_LARGE", f"the request headers are over {limit} bytes")
        else:
            self._refuse(400, "BAD_REQUEST", "the request is not valid HTTP/1.1")

    def _watch_headers(self) -> None:
        """Run the header deadline while a request's headers are awaited, stop it once they
        are in."""
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            self._stop_header_timer()
        elif self._header_timer is None:
            self._header_timer = self.loop.call_later(
                self.settings.header_timeout, self._headers_too_slow
            )

    def _stop_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            seconds = f"{self.settings.header_timeout:g}"
            self._refuse(408, "REQUEST_TIMEOUT", f"the headers did not arrive within {seconds} s")

    def _refuse(self, status: int, reason: str, message: str) -> None:
        """Answer before (or instead of) any request, then close (gently: `LingeringTransport`)."""
        self._stop_header_timer()
        if not self.transport.is_closing():
            self.transport.write(raw_response(status, reason, message))
            self.transport.close()


def protocol_for(settings: HttpGatewaySettings) -> type[GuardedProtocol]:
    """The protocol class uvicorn builds each connection from, bound to `settings`."""
    return type("BoundGuardedProtocol", (GuardedProtocol,), {"settings": settings})
