"""Acting for another user: only a trusted gateway may name one (`x-hookmesh-user`), and a
gateway that names one user acts for that user alone.

Each negative case of the rule has its own test, against real servers with real tokens: a
header from a principal that is not a gateway (even naming itself), a malformed header, a
gateway whose header names one user but whose request names another, and a gateway that
names nobody."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from hookmesh.errors import reason_of, status_of
from hookmesh.services.agent import load_config, start_agent_service
from hookmesh.services.memory import load_memory_config, start_memory_service
from hookmesh.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    agent_pb2,
    agent_pb2_grpc,
    memory_pb2,
    memory_pb2_grpc,
)
from tests.agent_helpers import SHORT_TIMEOUT

pytestmark = pytest.mark.timeout(60)

TOKENS = "alice:tok-alice,bob:tok-bob,gateway:tok-gw"
AUTH = {"token_env": "HOOKMESH_TEST_TOKENS", "trusted_gateways": ["gateway"]}


def _as(token: str, user: str | None = None) -> tuple[tuple[str, str], ...]:
    """Metadata of a call with `token`, naming `user` in the user header when given."""
    metadata = [("authorization", f"Bearer {token}")]
    if user is not None:
        metadata.append(("x-hookmesh-user", user))
    return tuple(metadata)


async def _refusal(call: Any) -> tuple[grpc.StatusCode, str]:
    """The code and reason a call that must fail ends with."""
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    status = status_of(caught.value)
    return caught.value.code(), reason_of(status) if status else ""


@pytest.fixture
async def memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Any]:
    """A memory service that trusts the principal ``gateway``, holding one fact of Alice's
    and one of Bob's; yields its stub."""
    monkeypatch.setenv("HOOKMESH_TEST_TOKENS", TOKENS)
    config = load_memory_config(None, store=f"sqlite:///{tmp_path}/memory.db", auth=AUTH)
    running = await start_memory_service(config, address="127.0.0.1:0")
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stub = memory_pb2_grpc.MemoryServiceStub(channel)
            for user in ("alice", "bob"):
                await stub.AddMemories(
                    memory_pb2.AddMemoriesRequest(
                        scope=memory_pb2.MemoryScope(user_id=user), facts=[f"{user} likes tea"]
                    ),
                    timeout=SHORT_TIMEOUT,
                    metadata=_as(f"tok-{user}"),
                )
            yield stub
    finally:
        await running.stop(None)


def _list(user: str = "") -> memory_pb2.ListMemoriesRequest:
    return memory_pb2.ListMemoriesRequest(scope=memory_pb2.MemoryScope(user_id=user))


async def _texts(stub: Any, request: Any, metadata: Any) -> list[str]:
    answer = await stub.ListMemories(request, timeout=SHORT_TIMEOUT, metadata=metadata)
    return [m.text for m in answer.memories]


@pytest.mark.parametrize("named", ["alice", "bob"])
async def test_a_user_header_from_a_principal_that_is_no_gateway_is_refused(
    memory: Any, named: str
) -> None:
    """Bob may not name Alice, nor even himself: the header is a gateway's alone."""
    call = memory.ListMemories(_list(), timeout=SHORT_TIMEOUT, metadata=_as("tok-bob", named))
    assert await _refusal(call) == (grpc.StatusCode.PERMISSION_DENIED, "UNTRUSTED_GATEWAY")


async def test_the_agent_service_refuses_a_header_from_no_gateway_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check is the interceptor's, so every server makes it (here the agent service)."""
    monkeypatch.setenv("HOOKMESH_TEST_TOKENS", TOKENS)
    config = load_config(None, store=f"sqlite:///{tmp_path}/agent.db", auth=AUTH)
    service = await start_agent_service(config, address="127.0.0.1:0")
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{service.port}") as channel:
            stub = agent_pb2_grpc.AgentServiceStub(channel)
            request = agent_pb2.ListSessionsRequest()
            call = stub.ListSessions(
                request, timeout=SHORT_TIMEOUT, metadata=_as("tok-bob", "alice")
            )
            assert await _refusal(call) == (
                grpc.StatusCode.PERMISSION_DENIED,
                "UNTRUSTED_GATEWAY",
            )
            # The gateway's header is believed: its call acts for Alice.
            answer = await stub.ListSessions(
                request, timeout=SHORT_TIMEOUT, metadata=_as("tok-gw", "alice")
            )
            assert list(answer.sessions) == []
    finally:
        await service.stop(None)


@pytest.mark.parametrize("header", ["", "x" * 129])
async def test_a_malformed_user_header_is_refused(memory: Any, header: str) -> None:
    call = memory.ListMemories(_list(), timeout=SHORT_TIMEOUT, metadata=_as("tok-gw", header))
    assert await _refusal(call) == (grpc.StatusCode.PERMISSION_DENIED, "INVALID_USER_HEADER")


async def test_the_longest_user_header_is_accepted(memory: Any) -> None:
    assert await _texts(memory, _list(), _as("tok-gw", "x" * 128)) == []


async def test_a_gateway_acts_for_the_user_its_header_names(memory: Any) -> None:
    assert await _texts(memory, _list(), _as("tok-gw", "alice")) == ["alice likes tea"]
    assert await _texts(memory, _list("alice"), _as("tok-gw", "alice")) == ["alice likes tea"]


async def test_a_gateway_naming_one_user_cannot_act_for_another(memory: Any) -> None:
    """Alice's header, Bob's request: refused, on every RPC that names a user."""
    alice = _as("tok-gw", "alice")
    bob = memory_pb2.MemoryScope(user_id="bob")
    calls = [
        memory.ListMemories(_list("bob"), timeout=SHORT_TIMEOUT, metadata=alice),
        memory.SearchMemories(
            memory_pb2.SearchMemoriesRequest(query="tea", scope=bob),
            timeout=SHORT_TIMEOUT,
            metadata=alice,
        ),
        memory.AddMemories(
            memory_pb2.AddMemoriesRequest(scope=bob, facts=["bob hates tea"]),
            timeout=SHORT_TIMEOUT,
            metadata=alice,
        ),
        memory.DeleteAllMemories(
            memory_pb2.DeleteAllMemoriesRequest(scope=bob), timeout=SHORT_TIMEOUT, metadata=alice
        ),
        memory.GetMemory(
            memory_pb2.GetMemoryRequest(user_id="bob", memory_id="m"),
            timeout=SHORT_TIMEOUT,
            metadata=alice,
        ),
    ]
    for call in calls:
        assert await _refusal(call) == (grpc.StatusCode.PERMISSION_DENIED, "USER_NOT_ALLOWED")
    assert await _texts(memory, _list("bob"), _as("tok-bob")) == ["bob likes tea"]


async def test_a_gateway_without_a_header_acts_for_the_user_its_request_names(
    memory: Any,
) -> None:
    assert await _texts(memory, _list("bob"), _as("tok-gw")) == ["bob likes tea"]


async def test_a_gateway_that_names_nobody_is_refused(memory: Any) -> None:
    call = memory.ListMemories(_list(), timeout=SHORT_TIMEOUT, metadata=_as("tok-gw"))
    assert await _refusal(call) == (grpc.StatusCode.INVALID_ARGUMENT, "USER_REQUIRED")


async def test_a_caller_that_names_nobody_acts_for_itself(memory: Any) -> None:
    assert await _texts(memory, _list(), _as("tok-bob")) == ["bob likes tea"]


async def test_a_gateway_whose_header_names_itself_acts_as_without_one(memory: Any) -> None:
    """Naming itself is naming no end user: the request must name the user, as without a
    header (the header does not make the gateway an ordinary caller limited to itself)."""
    itself = _as("tok-gw", "gateway")
    assert await _texts(memory, _list("bob"), itself) == ["bob likes tea"]
    call = memory.ListMemories(_list(), timeout=SHORT_TIMEOUT, metadata=itself)
    assert await _refusal(call) == (grpc.StatusCode.INVALID_ARGUMENT, "USER_REQUIRED")


async def test_a_gateway_acting_for_an_admin_is_no_admin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Admin rights are the authenticated principal's: a gateway whose header names the
    admin ``alice`` is refused ADMIN_ONLY (the call reaches no reload at all)."""
    monkeypatch.setenv("HOOKMESH_TEST_TOKENS", TOKENS)
    config = load_config(
        None, store=f"sqlite:///{tmp_path}/agent.db", auth=AUTH, admin_principals=["alice"]
    )
    service = await start_agent_service(config, address="127.0.0.1:0")
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{service.port}") as channel:
            stub = admin_pb2_grpc.AdminServiceStub(channel)
            request = admin_pb2.ReloadMiddlewaresRequest()
            for metadata in (_as("tok-gw", "alice"), _as("tok-bob")):
                call = stub.ReloadMiddlewares(request, timeout=SHORT_TIMEOUT, metadata=metadata)
                assert await _refusal(call) == (grpc.StatusCode.PERMISSION_DENIED, "ADMIN_ONLY")
            # Alice herself gets past the check (this service has no file to reload from).
            call = stub.ReloadMiddlewares(request, timeout=SHORT_TIMEOUT, metadata=_as("tok-alice"))
            assert await _refusal(call) == (grpc.StatusCode.FAILED_PRECONDITION, "NO_CONFIG_FILE")
    finally:
        await service.stop(None)
