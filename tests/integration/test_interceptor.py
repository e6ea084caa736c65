"""The one server interceptor: a HookmeshError a servicer raises becomes its rich status (in
all four RPC shapes, also after a stream sent responses), unexpected failures INTERNAL with a
request id (details only in the log), undecodable requests INVALID_ARGUMENT, and log lines
carry the id."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2

from hookmesh.cli._logging import JsonFormatter, _RequestId
from hookmesh.errors import FieldViolation, RequestError, SchemaError, status_of
from hookmesh.services import RunningServer, Service, start_server
from tests.agent_helpers import SHORT_TIMEOUT

pytestmark = pytest.mark.timeout(30)


async def _fail(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    logging.getLogger("hookmesh.test").warning("about to fail")
    raise RuntimeError("secret detail of the failure")


async def _echo(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    return request


_BAD_INPUT = SchemaError(
    [FieldViolation("name", "name it"), FieldViolation("size", "use 1 to 10")],
    reason="TEST_BAD_INPUT",
)


def _stopped(after: int) -> RequestError:
    return RequestError(
        grpc.StatusCode.FAILED_PRECONDITION,
        "TEST_STOPPED",
        f"stopped after {after} messages",
        metadata={"after": str(after)},
    )


async def _refuse(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    raise _BAD_INPUT


async def _count(request: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
    """Server stream: two responses, then an error."""
    yield b"1"
    yield b"2"
    raise _stopped(2)


async def _gather(requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> bytes:
    """Client stream: an error once the stream has ended."""
    received = [request async for request in requests]
    raise _stopped(len(received))


async def _chat(
    requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext
) -> AsyncIterator[bytes]:
    """Bidi stream: each request echoed, an error after the second."""
    received = 0
    async for request in requests:
        yield request
        received += 1
        if received == 2:
            raise _stopped(received)


def _add(unused_servicer: Any, server: grpc.aio.Server) -> None:
    handlers = {
        "Fail": grpc.unary_unary_rpc_method_handler(_fail),
        "Echo": grpc.unary_unary_rpc_method_handler(
            _echo, request_deserializer=_strict, response_serializer=bytes
        ),
        "Refuse": grpc.unary_unary_rpc_method_handler(_refuse),
        "Count": grpc.unary_stream_rpc_method_handler(_count),
        "Gather": grpc.stream_unary_rpc_method_handler(_gather),
        "Chat": grpc.stream_stream_rpc_method_handler(_chat),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("test.Probe", handlers),))


def _strict(data: bytes) -> bytes:
    if data.startswith(b"\xff"):
        raise ValueError("not a valid message")
    return data


@pytest.fixture
async def server() -> AsyncIterator[RunningServer]:
    running = await start_server([Service("test.Probe", None, _add)])
    try:
        yield running
    finally:
        await running.stop(None)


async def test_an_unexpected_failure_is_internal_with_the_request_id(
    server: RunningServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.handler.addFilter(_RequestId())
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        call = channel.unary_unary("/test.Probe/Fail")
        with pytest.raises(grpc.aio.AioRpcError) as exc:
            await call(b"", timeout=SHORT_TIMEOUT, metadata=(("x-request-id", "req-42"),))
    assert exc.value.code() == grpc.StatusCode.INTERNAL
    assert "secret" not in (exc.value.details() or "")
    assert "req-42" in (exc.value.details() or "")
    status = status_of(exc.value)
    assert status is not None and "req-42" in str(status.details[0].value)
    records = [r for r in caplog.records if getattr(r, "request_id", "") == "req-42"]
    assert [r.getMessage() for r in records] == [
        "about to fail",
        "unhandled error in /test.Probe/Fail",
    ]
    line = json.loads(JsonFormatter().format(records[-1]))
    assert line["request_id"] == "req-42" and "secret detail" in line["exception"]


async def test_undecodable_wire_data_is_invalid_argument(server: RunningServer) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        echo = channel.unary_unary("/test.Probe/Echo")
        assert await echo(b"fine", timeout=SHORT_TIMEOUT) == b"fine"
        with pytest.raises(grpc.aio.AioRpcError) as exc:
            await echo(b"\xffbad", timeout=SHORT_TIMEOUT)
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "not valid protobuf wire data" in (exc.value.details() or "")


def _rich(error: grpc.aio.AioRpcError) -> tuple[error_details_pb2.ErrorInfo, list[Any]]:
    """The one ErrorInfo of a failed call, and its other details."""
    status = status_of(error)
    assert status is not None and status.code == error.code().value[0]
    assert status.message == error.details()
    infos = [d for d in status.details if d.Is(error_details_pb2.ErrorInfo.DESCRIPTOR)]
    assert len(infos) == 1, status.details
    info = error_details_pb2.ErrorInfo()
    infos[0].Unpack(info)
    assert info.domain == "hookmesh.dev"
    return info, [d for d in status.details if d is not infos[0]]


async def test_a_hookmesh_error_is_its_status_with_one_error_info_and_the_bad_fields(
    server: RunningServer,
) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        with pytest.raises(grpc.aio.AioRpcError) as exc:
            await channel.unary_unary("/test.Probe/Refuse")(b"", timeout=SHORT_TIMEOUT)
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert exc.value.details() == "name: name it (and 1 more)"
    info, others = _rich(exc.value)
    assert (info.reason, dict(info.metadata)) == (
        "TEST_BAD_INPUT",
        {"field": "name", "violationCount": "2"},
    )
    (detail,) = others
    bad = error_details_pb2.BadRequest()
    assert detail.Unpack(bad)
    assert [(v.field, v.description) for v in bad.field_violations] == [
        ("name", "name it"),
        ("size", "use 1 to 10"),
    ]


async def test_an_error_after_streamed_responses_still_ends_the_call_with_its_status(
    server: RunningServer,
) -> None:
    async def requests() -> AsyncIterator[bytes]:
        for request in (b"a", b"b", b"c"):
            yield request

    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        count = channel.unary_stream("/test.Probe/Count")(b"", timeout=SHORT_TIMEOUT)
        chat = channel.stream_stream("/test.Probe/Chat")(requests(), timeout=SHORT_TIMEOUT)
        for call, sent in ((count, [b"1", b"2"]), (chat, [b"a", b"b"])):
            received = []
            with pytest.raises(grpc.aio.AioRpcError) as exc:
                async for response in call:
                    received.append(response)
            assert received == sent
            assert exc.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            info, others = _rich(exc.value)
            assert (info.reason, dict(info.metadata), others) == (
                "TEST_STOPPED",
                {"after": "2"},
                [],
            )
        with pytest.raises(grpc.aio.AioRpcError) as exc:
            await channel.stream_unary("/test.Probe/Gather")(requests(), timeout=SHORT_TIMEOUT)
    assert (exc.value.code(), exc.value.details()) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "stopped after 3 messages",
    )
    info, _ = _rich(exc.value)
    assert (info.reason, dict(info.metadata)) == ("TEST_STOPPED", {"after": "3"})
