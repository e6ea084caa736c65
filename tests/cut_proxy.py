"""A TCP proxy on loopback whose open connections a test can cut at once, as a network that
drops them does: clients see the stream break (UNAVAILABLE without a reason) and may
connect again through it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class CutProxy:
    """Forwards each connection to `upstream`; `cut` resets every open one."""

    def __init__(self, upstream: str = "") -> None:
        self.upstream = upstream
        """``host:port`` new connections go to; a test may point it at a restarted server."""
        self._open: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None
        self.address = ""
        self.connections = 0
        """Connections accepted so far."""
        self.accepted = asyncio.Event()
        """Set once a first connection came in."""

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.address = f"127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.accepted.set()
        host, _, port = self.upstream.rpartition(":")
        up_reader, up_writer = await asyncio.open_connection(host, int(port))
        self._open.update((writer, up_writer))
        pumps = [
            asyncio.create_task(self._pump(reader, up_writer)),
            asyncio.create_task(self._pump(up_reader, writer)),
        ]
        self._tasks.update(pumps)
        await asyncio.gather(*pumps, return_exceptions=True)
        self._tasks.difference_update(pumps)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            self._open.discard(writer)
            writer.close()

    def cut(self) -> None:
        """Reset every open connection, both sides (new ones are still accepted)."""
        for writer in list(self._open):
            writer.transport.abort()
        self._open.clear()

    async def stop(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in list(self._tasks):
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*self._tasks, return_exceptions=True)


@asynccontextmanager
async def cut_proxy(upstream: str = "") -> AsyncIterator[CutProxy]:
    """A `CutProxy` in front of `upstream` (or of the one set before the first connection)
    until the block ends."""
    proxy = CutProxy(upstream)
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.stop()
