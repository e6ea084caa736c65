"""The one server interceptor: unexpected failures become INTERNAL with a request id (details
only in the log), undecodable requests INVALID_ARGUMENT, and log lines carry the id."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from hookmesh.cli._logging import JsonFormatter, _RequestId
from hookmesh.errors import status_of
from hookmesh.services import RunningServer, Service, start_server
from tests.agent_helpers import SHORT_TIMEOUT

pytestmark = pytest.mark.timeout(30)


async def _fail(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    logging.getLogger("hookmesh.test").warning("about to fail")
    raise RuntimeError("secret detail of the failure")


async def _echo(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    return request


def _add(unused_servicer: Any, server: grpc.aio.Server) -> None:
    handlers = {
        "Fail": grpc.unary_unary_rpc_method_handler(_fail),
        "Echo": grpc.unary_unary_rpc_method_handler(
            _echo, request_deserializer=_strict, response_serializer=bytes
        ),
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
