"""The interceptor in every RPC shape, beyond unary: a call without credentials, with a wrong
token or with a user header from no gateway is refused before the servicer runs, whether
unary, server-, client- or bidi-streaming; the caller reaches the servicer in each shape;
undecodable stream messages are INVALID_ARGUMENT; an unexpected failure in a stream is
INTERNAL with the request id; a malformed request id is replaced."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2

from hookmesh.errors import RequestError, reason_of, status_of
from hookmesh.server import Authenticator, RunningServer, Service, current_user, start_server
from hookmesh.server._auth import current_principal
from tests.agent_helpers import SHORT_TIMEOUT

pytestmark = pytest.mark.timeout(30)

_ran: list[str] = []
"""The shapes whose servicer ran, in order."""


def _caller() -> bytes:
    return f"{current_principal()}/{current_user()}".encode()


async def _who(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    _ran.append("unary")
    if request == b"fail":
        raise RuntimeError("secret detail")
    if request == b"cancel":
        raise RequestError(grpc.StatusCode.CANCELLED, "TEST_CANCELLED", "the test cancelled")
    return _caller()


async def _whos(request: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
    _ran.append("server")
    yield _caller()
    if request == b"fail":
        raise RuntimeError("secret detail")


async def _gather(requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> bytes:
    _ran.append("client")
    async for request in requests:
        if request == b"fail":
            raise RuntimeError("secret detail")
    return _caller()


async def _chat(
    requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext
) -> AsyncIterator[bytes]:
    _ran.append("bidi")
    async for request in requests:
        if request == b"fail":
            raise RuntimeError("secret detail")
        yield _caller()


def _strict(data: bytes) -> bytes:
    if data.startswith(b"\xff"):
        raise ValueError("not a valid message")
    return data


def _add(unused_servicer: Any, server: grpc.aio.Server) -> None:
    codec = {"request_deserializer": _strict, "response_serializer": bytes}
    handlers = {
        "Who": grpc.unary_unary_rpc_method_handler(_who, **codec),
        "Whos": grpc.unary_stream_rpc_method_handler(_whos, **codec),
        "Gather": grpc.stream_unary_rpc_method_handler(_gather, **codec),
        "Chat": grpc.stream_stream_rpc_method_handler(_chat, **codec),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("test.Who", handlers),))


@pytest.fixture
async def channel() -> AsyncIterator[grpc.aio.Channel]:
    """A channel to a probe server whose tokens are Alice's and a trusted gateway's."""
    _ran.clear()
    auth = Authenticator({"tok-a": "alice", "tok-gw": "gateway"}, trusted_gateways=["gateway"])
    services = [Service("test.Who", None, _add)]
    running: RunningServer = await start_server(services, authenticator=auth)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as opened:
            yield opened
    finally:
        await running.stop(None)


Call = Callable[[grpc.aio.Channel, list[bytes], Any], Awaitable[list[bytes]]]


async def _unary(channel: grpc.aio.Channel, sent: list[bytes], metadata: Any) -> list[bytes]:
    call = channel.unary_unary("/test.Who/Who")
    return [await call(sent[0], timeout=SHORT_TIMEOUT, metadata=metadata)]


async def _server(channel: grpc.aio.Channel, sent: list[bytes], metadata: Any) -> list[bytes]:
    call = channel.unary_stream("/test.Who/Whos")(sent[0], timeout=SHORT_TIMEOUT, metadata=metadata)
    return [response async for response in call]


async def _stream(sent: list[bytes]) -> AsyncIterator[bytes]:
    for message in sent:
        yield message


async def _client(channel: grpc.aio.Channel, sent: list[bytes], metadata: Any) -> list[bytes]:
    call = channel.stream_unary("/test.Who/Gather")
    return [await call(_stream(sent), timeout=SHORT_TIMEOUT, metadata=metadata)]


async def _bidi(channel: grpc.aio.Channel, sent: list[bytes], metadata: Any) -> list[bytes]:
    call = channel.stream_stream("/test.Who/Chat")(
        _stream(sent), timeout=SHORT_TIMEOUT, metadata=metadata
    )
    return [response async for response in call]


SHAPES: dict[str, Call] = {"unary": _unary, "server": _server, "client": _client, "bidi": _bidi}


def _token(token: str, user: str | None = None) -> tuple[tuple[str, str], ...]:
    header = () if user is None else (("x-hookmesh-user", user),)
    return (("authorization", f"Bearer {token}"), *header)


async def _failure(call: Awaitable[Any]) -> tuple[grpc.StatusCode, str, dict[str, str]]:
    """Code, reason and ErrorInfo metadata of a call that must fail."""
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    status = status_of(caught.value)
    assert status is not None
    info = error_details_pb2.ErrorInfo()
    for detail in status.details:
        if detail.Unpack(info):
            break
    return caught.value.code(), reason_of(status), dict(info.metadata)


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize(
    ("metadata", "code", "reason"),
    [
        ((), grpc.StatusCode.UNAUTHENTICATED, "CREDENTIALS_REQUIRED"),
        (_token("nope"), grpc.StatusCode.UNAUTHENTICATED, "INVALID_TOKEN"),
        (_token("tok-a", "bob"), grpc.StatusCode.PERMISSION_DENIED, "UNTRUSTED_GATEWAY"),
    ],
    ids=["no-token", "wrong-token", "header-from-no-gateway"],
)
async def test_a_refused_call_never_reaches_the_servicer(
    channel: grpc.aio.Channel, shape: str, metadata: Any, code: grpc.StatusCode, reason: str
) -> None:
    got = await _failure(SHAPES[shape](channel, [b"hi"], metadata))
    assert got[:2] == (code, reason)
    assert _ran == []


@pytest.mark.parametrize("key", ["aaa", "accept", "authorizatio", "authorization-extra", "zzz"])
async def test_other_metadata_is_no_token(channel: grpc.aio.Channel, key: str) -> None:
    """Only the ``authorization`` key carries a token: any other key (sorting before or after
    it) leaves the call without credentials, and the message says what is required."""
    call = channel.unary_unary("/test.Who/Who")(
        b"hi", timeout=SHORT_TIMEOUT, metadata=((key, "Bearer tok-a"),)
    )
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    status = status_of(caught.value)
    assert status is not None and reason_of(status) == "CREDENTIALS_REQUIRED"
    assert caught.value.details() == "this server requires 'authorization: Bearer <token>'"
    assert _ran == []


@pytest.mark.parametrize("shape", list(SHAPES))
async def test_every_shape_sees_its_caller(channel: grpc.aio.Channel, shape: str) -> None:
    assert await SHAPES[shape](channel, [b"hi"], _token("tok-a")) == [b"alice/alice"]
    assert await SHAPES[shape](channel, [b"hi"], _token("tok-gw", "bob")) == [b"gateway/bob"]
    assert _ran == [shape, shape]


@pytest.mark.parametrize("shape", list(SHAPES))
async def test_undecodable_data_is_invalid_argument_in_every_shape(
    channel: grpc.aio.Channel, shape: str
) -> None:
    """A stream's bad message comes after a good one: it is checked as it arrives."""
    sent = [b"\xffbad"] if shape in ("unary", "server") else [b"ok", b"\xffbad"]
    code, reason, _ = await _failure(SHAPES[shape](channel, sent, _token("tok-a")))
    assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "UNDECODABLE_REQUEST")


@pytest.mark.parametrize("shape", list(SHAPES))
async def test_an_unexpected_failure_is_internal_in_every_shape(
    channel: grpc.aio.Channel, shape: str
) -> None:
    metadata = (*_token("tok-a"), ("x-request-id", "req-7"))
    code, reason, info = await _failure(SHAPES[shape](channel, [b"fail"], metadata))
    assert (code, reason, info) == (grpc.StatusCode.INTERNAL, "INTERNAL", {"requestId": "req-7"})


@pytest.mark.parametrize(
    ("given", "kept"),
    [("a" * 64, True), ("a.b_c:d-9", True), ("a" * 65, False), ("bad id", False), ("", False)],
)
async def test_a_malformed_request_id_is_replaced(
    channel: grpc.aio.Channel, given: str, kept: bool
) -> None:
    metadata = (*_token("tok-a"), ("x-request-id", given))
    *_, info = await _failure(_unary(channel, [b"fail"], metadata))
    if kept:
        assert info == {"requestId": given}
    else:
        assert re.fullmatch(r"[0-9a-f]{16}", info["requestId"])


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ((("a-first", "one"), ("x-request-id", "req-9"), ("zz-last", "two")), "req-9"),
        ((("zz-last", "two"), ("x-request-id", "req-9"), ("a-first", "one")), "req-9"),
        ((("x-hookmesh-user", "bob"), ("x-request-id", "req-9")), "req-9"),
    ],
    ids=["before-after", "after-before", "user-header-first"],
)
async def test_only_the_request_id_header_names_the_request(
    channel: grpc.aio.Channel, metadata: Any, expected: str
) -> None:
    """Other well-formed values (sorting before or after it) are not the request id."""
    *_, info = await _failure(_unary(channel, [b"fail"], (*_token("tok-gw"), *metadata)))
    assert info == {"requestId": expected}


async def test_each_call_has_a_server_span_with_its_status(
    channel: grpc.aio.Channel, span_exporter: Any
) -> None:
    """OK and CANCELLED are not errors; anything else is, and the code is an attribute."""
    from opentelemetry.trace import StatusCode

    span_exporter.clear()
    assert await _unary(channel, [b"hi"], _token("tok-a")) == [b"alice/alice"]
    await _failure(_unary(channel, [b"fail"], _token("tok-a")))
    await _failure(_unary(channel, [b"hi"], ()))
    await _failure(_unary(channel, [b"cancel"], _token("tok-a")))
    spans = [s for s in span_exporter.get_finished_spans() if s.name.startswith("/test.Who/")]
    got = [(s.attributes["rpc.grpc.status_code"], s.status.status_code) for s in spans]
    assert got == [
        (0, StatusCode.UNSET),
        (13, StatusCode.ERROR),
        (16, StatusCode.ERROR),
        (1, StatusCode.UNSET),
    ]
