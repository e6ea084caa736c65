"""The sidecar host (MiddlewareServicer) driven over raw Intercept streams: what it does with
each message an agent may send, well-formed or not."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest

from hookmesh.remote import serve_middleware
from hookmesh.server import RunningServer
from hookmesh.v1 import middleware_pb2 as pb
from hookmesh.v1 import middleware_pb2_grpc as pb_grpc
from tests import remote_middlewares as rmws

pytestmark = pytest.mark.timeout(60)

DEADLINE = 10.0


@pytest.fixture
async def stuck() -> AsyncIterator[tuple[rmws.Stuck, RunningServer]]:
    """A sidecar whose on_reasoning waits until cancelled."""
    mw = rmws.Stuck()
    running = await serve_middleware(mw)
    try:
        yield mw, running
    finally:
        await running.stop(None)


def reasoning(invocation_id: str, reply_id: str = "r1") -> pb.InterceptRequest:
    return pb.InterceptRequest(
        invocation_id=invocation_id,
        invocation=pb.HookInvocation(
            hook=pb.HOOK_ON_REASONING, reply_id=reply_id, reasoning=pb.ReasoningArgs()
        ),
    )


async def test_the_4097th_invocation_running_on_one_stream_is_refused(
    stuck: tuple[rmws.Stuck, RunningServer],
) -> None:
    _, running = stuck
    async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        stream = pb_grpc.MiddlewareServiceStub(channel).Intercept(timeout=DEADLINE)
        for n in range(4098):
            await stream.write(reasoning(str(n), reply_id=f"r{n}"))
        refused = [await stream.read(), await stream.read()]
        stream.cancel()
    assert [r.invocation_id for r in refused] == ["4096", "4097"]
    assert {r.done.error.reason for r in refused} == {"TOO_MANY_INVOCATIONS"}
    assert "4096 invocations" in refused[0].done.error.message
