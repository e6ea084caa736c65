"""The memory service's request bound, at its edge: a request of exactly
`max_request_bytes` is accepted, one byte more is REQUEST_TOO_LARGE on the field it grew
(facts, or messages when it carries messages)."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from hookmesh.errors import field_violations_of, reason_of, status_of
from hookmesh.schema import make_user_text, message_to_proto
from hookmesh.services.memory import load_memory_config, start_memory_service
from hookmesh.v1 import memory_pb2, memory_pb2_grpc

pytestmark = pytest.mark.timeout(60)

_LIMIT = 2048


def _sized(size: int, *, messages: bool = False) -> memory_pb2.AddMemoriesRequest:
    """An AddMemories request of exactly `size` bytes (one fact or one message grows)."""
    request = memory_pb2.AddMemoriesRequest(scope=memory_pb2.MemoryScope(user_id="u"))
    text = "x"
    while True:
        if messages:
            request.ClearField("messages")
            request.messages.append(message_to_proto(make_user_text("flat", text, id="m1")))
        else:
            request.ClearField("facts")
            request.facts.append(text)
        if request.ByteSize() >= size:
            assert request.ByteSize() == size, "the size is reachable one byte at a time"
            return request
        text += "x" * max(1, min(size - request.ByteSize(), 100))


@pytest.mark.parametrize("messages", [False, True], ids=["facts", "messages"])
async def test_the_request_bound_is_inclusive(tmp_path: Path, messages: bool) -> None:
    config = load_memory_config(
        None, store=f"sqlite:///{tmp_path}/memory.db", max_request_bytes=_LIMIT
    )
    running = await start_memory_service(config, address="127.0.0.1:0")
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stub = memory_pb2_grpc.MemoryServiceStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.AddMemories(_sized(_LIMIT + 1, messages=messages), timeout=10)
            status = status_of(caught.value)
            assert status is not None and reason_of(status) == "REQUEST_TOO_LARGE"
            field = "messages" if messages else "facts"
            assert [v.field for v in field_violations_of(status)] == [field]
            await stub.AddMemories(_sized(_LIMIT, messages=messages), timeout=10)
    finally:
        await running.stop(None)
