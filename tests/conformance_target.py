"""The `target` fixture of the conformance kit's tests: a sidecar served in process on
loopback (a middleware through the Python host, or a servicer of its own), as the rules'
runner reaches it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import grpc
import pytest

from hookmesh.conformance._rules import Target
from hookmesh.middleware import Middleware
from hookmesh.remote import SERVICE_NAME, serve_middleware
from hookmesh.remote._host import MiddlewareServicer
from hookmesh.server import Service, start_server
from hookmesh.v1 import middleware_pb2_grpc as pb_grpc

TIMEOUT = 2.0
"""Seconds a rule waits for each expected message (the broken ones time out on purpose)."""

Serve = Callable[..., Awaitable[Target]]


@pytest.fixture
async def target() -> AsyncIterator[Serve]:
    """Yields a function serving a sidecar and returning the runner's target for it; every
    server and channel is closed at the end."""
    servers: list[object] = []
    channels: list[grpc.aio.Channel] = []

    async def serve(sidecar: Middleware | MiddlewareServicer, token: str | None = None) -> Target:
        if isinstance(sidecar, MiddlewareServicer):
            service = Service(
                SERVICE_NAME, sidecar, pb_grpc.add_MiddlewareServiceServicer_to_server
            )
            running = await start_server([service], "127.0.0.1:0")
        else:
            running = await serve_middleware(sidecar, token=token)
        servers.append(running)
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{running.port}")
        channels.append(channel)
        metadata = (("authorization", f"Bearer {token}"),) if token else ()
        return Target(pb_grpc.MiddlewareServiceStub(channel), metadata, TIMEOUT, bool(token))

    try:
        yield serve
    finally:
        for channel in channels:
            await channel.close()
        for running in servers:
            await running.stop(None)  # type: ignore[attr-defined]
