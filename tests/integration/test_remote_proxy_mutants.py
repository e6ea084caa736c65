"""The agent's side of a sidecar (RemoteMiddleware) where the mutation run found gaps: what
it takes from Describe, when it is ready, and what it sends in each hook's arguments."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from hookmesh.middleware import Middleware
from hookmesh.remote import SERVICE_NAME, RemoteMiddleware, serve_middleware
from hookmesh.server import RunningServer
from tests import middlewares as mws
from tests.agent_helpers import SHORT_TIMEOUT

pytestmark = pytest.mark.timeout(60)

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


async def test_the_description_taken_is_the_sidecars_with_the_configured_failure_mode(
    serve: Serve,
) -> None:
    running, remote = await serve(mws.ToolGiver(), failure_mode="fail_open")
    sent = running.servicers[SERVICE_NAME].description
    assert remote.description_hash == hashlib.sha256(sent.SerializeToString()).hexdigest()
    assert remote.describe().failure_mode == remote.failure_mode == "fail_open"
    assert remote.middleware_key() == mws.ToolGiver().middleware_key()
    assert [t.name for t in remote.list_tools()] == ["shout"]
    assert remote.described_now and remote.serving
