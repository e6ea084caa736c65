"""An idle connection stays open: a client with hookmesh's keepalive settings pings a server
with hookmesh's, quietly, for many pings, with no GOAWAY ``too_many_pings`` (the production
intervals scaled down, so minutes of idleness pass in seconds)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from hookmesh._security import CLIENT_KEEPALIVE, SERVER_KEEPALIVE, open_channel
from hookmesh.server import start_server

pytestmark = pytest.mark.timeout(60)

SCALE = 30
"""Production intervals over this: the client pings every second, the server accepts one
every 0.67 s."""
PINGS = 8
"""Idle keepalive intervals the stream must survive (a server that refuses the pings sends
GOAWAY after its third strike)."""


def _scaled(options: tuple[tuple[str, Any], ...]) -> list[tuple[str, Any]]:
    return [(k, v // SCALE if k.endswith("_ms") and v else v) for k, v in options]


async def test_an_idle_stream_survives_many_keepalive_pings() -> None:
    client_ping = dict(CLIENT_KEEPALIVE)["grpc.keepalive_time_ms"] / SCALE / 1000
    server = await start_server([], options=_scaled(SERVER_KEEPALIVE))
    try:
        target = f"127.0.0.1:{server.port}"
        async with open_channel(target, options=_scaled(CLIENT_KEEPALIVE)) as ch:
            stub = health_pb2_grpc.HealthStub(ch)
            watch = stub.Watch(health_pb2.HealthCheckRequest(), timeout=PINGS * client_ping * 3)
            first = await anext(aiter(watch))
            assert first.status == health_pb2.HealthCheckResponse.SERVING
            # Silence is the point: the wait must end by its own timeout, not by a GOAWAY
            # that would fail the stream with UNAVAILABLE.
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(PINGS * client_ping):
                    await anext(aiter(watch))
            answer = await stub.Check(health_pb2.HealthCheckRequest(), timeout=5)
            assert answer.status == health_pb2.HealthCheckResponse.SERVING
            watch.cancel()
    finally:
        await server.stop(None)
