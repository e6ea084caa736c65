"""Services started by integration tests: on loopback, all stopped when the test ends."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Protocol, TypeVar


class Served(Protocol):
    """What every service start function returns (a `RunningServer`)."""

    port: int

    async def stop(self, grace: float | None = ...) -> None: ...


S = TypeVar("S", bound=Served)


@asynccontextmanager
async def stopped_at_exit(
    start_one: Callable[..., Awaitable[S]],
) -> AsyncIterator[Callable[..., Awaitable[S]]]:
    """`start_one`, remembering each service it starts; on exit all are stopped (no grace).

    A test fixture yields what this yields: ``async with stopped_at_exit(run) as start:``.
    """
    started: list[S] = []

    async def start(*args: Any, **kwargs: Any) -> S:
        service = await start_one(*args, **kwargs)
        started.append(service)
        return service

    try:
        yield start
    finally:
        for service in started:
            await service.stop(None)


def target(service: Served) -> str:
    """The service's address on loopback."""
    return f"127.0.0.1:{service.port}"


@asynccontextmanager
async def serving(started: Awaitable[Served]) -> AsyncIterator[str]:
    """The loopback address of the service `started` starts; stopped (no grace) at the end.

    A fixture yields what this yields: ``async with serving(start_x(...)) as address:``.
    """
    service = await started
    try:
        yield target(service)
    finally:
        await service.stop(None)


def nobody() -> str:
    """A loopback address nothing listens on (a port the OS handed out, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"
