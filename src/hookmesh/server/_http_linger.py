"""A socket transport that closes gently: a gateway that refuses a request before reading all of
it must not reset the connection, or the client never reads why."""

from __future__ import annotations

import asyncio
from typing import Any

LINGER_SECONDS = 2.0
"""How long a closed connection keeps reading (and dropping) what the client still sends."""


class LingeringTransport(asyncio.Transport):
    """`inner`, whose `close` half-closes instead: the answer already written goes out with a
    FIN, bytes the client is still sending (the rest of a refused body) are dropped by the
    protocol (`lingering`), and the socket closes when the client closes its side or after
    `LINGER_SECONDS`. A socket closed with unread bytes would answer them with a reset, which
    discards the answer before the client reads it.

    Args:
        inner: The event loop's socket transport.
        loop: The loop the linger timer runs on.
    """

    def __init__(self, inner: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._inner = inner
        self._loop = loop
        self._timer: asyncio.TimerHandle | None = None
        self.lingering = False

    def close(self) -> None:
        if self.lingering or self._inner.is_closing():
            return
        if not self._inner.can_write_eof():
            self._inner.close()
            return
        self.lingering = True
        self._inner.write_eof()
        self._inner.resume_reading()
        self._timer = self._loop.call_later(LINGER_SECONDS, self._inner.close)

    def closed(self) -> None:
        """The connection is gone: stop the linger timer."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def is_closing(self) -> bool:
        return self.lingering or self._inner.is_closing()

    def write(self, data: Any) -> None:
        if not self.lingering:
            self._inner.write(data)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._inner.get_extra_info(name, default)

    def pause_reading(self) -> None:
        if not self.lingering:
            self._inner.pause_reading()

    def resume_reading(self) -> None:
        self._inner.resume_reading()

    def is_reading(self) -> bool:
        return self._inner.is_reading()

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._inner.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._inner.get_protocol()

    def abort(self) -> None:
        self._inner.abort()

    def can_write_eof(self) -> bool:
        return self._inner.can_write_eof()

    def write_eof(self) -> None:
        self._inner.write_eof()

    def get_write_buffer_size(self) -> int:
        return self._inner.get_write_buffer_size()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._inner.set_write_buffer_limits(high, low)
