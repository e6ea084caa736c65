"""The `serve` fixture: a middleware served in process on loopback with a RemoteMiddleware
connected to it, both closed at the end of the test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from hookmesh.middleware import Middleware
from hookmesh.remote import RemoteMiddleware, serve_middleware
from hookmesh.server import RunningServer
from tests.agent_helpers import SHORT_TIMEOUT

Serve = Callable[..., Awaitable[tuple[RunningServer, RemoteMiddleware]]]


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    """Serve a middleware in process on loopback and connect a RemoteMiddleware to it."""
    opened: list[tuple[RunningServer, RemoteMiddleware]] = []

    async def start(mw: Middleware, **connect: Any) -> tuple[RunningServer, RemoteMiddleware]:
        running = await serve_middleware(mw)
        remote = await RemoteMiddleware.connect(
            f"127.0.0.1:{running.port}", **{"timeout": SHORT_TIMEOUT, **connect}
        )
        opened.append((running, remote))
        return running, remote

    try:
        yield start
    finally:
        for running, remote in opened:
            await remote.aclose()
            await running.stop(None)
