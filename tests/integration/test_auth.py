"""Every server checks its callers the same way, and principals are kept apart.

The auth matrix runs against each server (agent, retrieval, memory, TTS, sidecar): no token,
a wrong token, the right token, mTLS with a foreign CA, plaintext against TLS; health stays
open. Tenancy: principal A cannot list, read, resume or delete B's sessions, read B's
memories, or search a knowledge base it is not granted."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from hookmesh._security import ClientTLS, open_channel
from hookmesh.client import AgentClient, AgentClientError, MemoryClient, RetrievalClient
from hookmesh.errors import reason_of, status_of
from hookmesh.memory import MemoryScope
from hookmesh.remote import serve_middleware
from hookmesh.retrieval import Document
from hookmesh.services import AuthConfig
from hookmesh.services.agent import load_config, start_agent_service
from hookmesh.services.memory import load_memory_config, start_memory_service
from hookmesh.services.retrieval import load_retrieval_config, start_retrieval_service
from hookmesh.services.tts import load_tts_config, start_tts_service
from hookmesh.v1 import (
    agent_pb2,
    agent_pb2_grpc,
    memory_pb2,
    memory_pb2_grpc,
    middleware_pb2,
    middleware_pb2_grpc,
    retrieval_pb2,
    retrieval_pb2_grpc,
    tts_pb2,
    tts_pb2_grpc,
)
from tests import middlewares as mws
from tests.agent_helpers import SHORT_TIMEOUT

pytestmark = pytest.mark.timeout(120)

TOKENS = "alice:tok-alice,bob:tok-bob"


def bearer(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


@pytest.fixture
def auth_files(tmp_path: Path, pki: dict[str, bytes], monkeypatch: pytest.MonkeyPatch) -> Path:
    """The tokens in an environment variable; certificates as files."""
    monkeypatch.setenv("HOOKMESH_TEST_TOKENS", TOKENS)
    for name, pem in pki.items():
        (tmp_path / f"{name}.pem").write_bytes(pem)
    return tmp_path


Probe = Callable[[grpc.aio.Channel, tuple[tuple[str, str], ...]], Awaitable[Any]]
"""One cheap call of a server's service, with the given metadata."""


async def _agent(channel: grpc.aio.Channel, metadata: Any) -> Any:
    stub = agent_pb2_grpc.AgentServiceStub(channel)
    return await stub.ListSessions(
        agent_pb2.ListSessionsRequest(), timeout=SHORT_TIMEOUT, metadata=metadata
    )


async def _retrieval(channel: grpc.aio.Channel, metadata: Any) -> Any:
    stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
    return await stub.ListKnowledgeBases(
        retrieval_pb2.ListKnowledgeBasesRequest(), timeout=SHORT_TIMEOUT, metadata=metadata
    )


async def _memory(channel: grpc.aio.Channel, metadata: Any) -> Any:
    stub = memory_pb2_grpc.MemoryServiceStub(channel)
    request = memory_pb2.ListMemoriesRequest(scope=memory_pb2.MemoryScope(user_id="alice"))
    return await stub.ListMemories(request, timeout=SHORT_TIMEOUT, metadata=metadata)


async def _tts(channel: grpc.aio.Channel, metadata: Any) -> Any:
    stub = tts_pb2_grpc.TTSServiceStub(channel)
    return await stub.ListVoices(
        tts_pb2.ListVoicesRequest(), timeout=SHORT_TIMEOUT, metadata=metadata
    )


async def _sidecar(channel: grpc.aio.Channel, metadata: Any) -> Any:
    stub = middleware_pb2_grpc.MiddlewareServiceStub(channel)
    return await stub.Describe(
        middleware_pb2.DescribeRequest(), timeout=SHORT_TIMEOUT, metadata=metadata
    )


async def _start(server: str, auth: AuthConfig, data: Path) -> Any:
    if server == "agent":
        config = load_config(None, store=f"sqlite:///{data}/agent.db", auth=auth.model_dump())
        return await start_agent_service(config, address="127.0.0.1:0")
    if server == "retrieval":
        config = load_retrieval_config(
            None, store=f"sqlite:///{data}/kb.db", auth=auth.model_dump()
        )
        return await start_retrieval_service(config, address="127.0.0.1:0")
    if server == "memory":
        config = load_memory_config(
            None, store=f"sqlite:///{data}/memory.db", auth=auth.model_dump()
        )
        return await start_memory_service(config, address="127.0.0.1:0")
    if server == "tts":
        return await start_tts_service(
            load_tts_config(None, auth=auth.model_dump()), address="127.0.0.1:0"
        )
    return await serve_middleware(mws.CallCounter(), auth=auth)


PROBES: dict[str, Probe] = {
    "agent": _agent,
    "retrieval": _retrieval,
    "memory": _memory,
    "tts": _tts,
    "sidecar": _sidecar,
}


async def _code(probe: Probe, channel: grpc.aio.Channel, metadata: Any) -> tuple[str, str]:
    try:
        await probe(channel, metadata)
    except grpc.aio.AioRpcError as exc:
        status = status_of(exc)
        return exc.code().name, reason_of(status) if status else ""
    return "OK", ""


async def _healthy(channel: grpc.aio.Channel) -> bool:
    answer = await health_pb2_grpc.HealthStub(channel).Check(
        health_pb2.HealthCheckRequest(), timeout=SHORT_TIMEOUT
    )
    return answer.status == health_pb2.HealthCheckResponse.SERVING


@pytest.mark.parametrize("server", list(PROBES))
async def test_tokens_over_plaintext(server: str, auth_files: Path) -> None:
    running = await _start(server, AuthConfig(token_env="HOOKMESH_TEST_TOKENS"), auth_files)
    probe = PROBES[server]
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            assert await _code(probe, channel, ()) == ("UNAUTHENTICATED", "CREDENTIALS_REQUIRED")
            assert await _code(probe, channel, bearer("nope")) == (
                "UNAUTHENTICATED",
                "INVALID_TOKEN",
            )
            assert await _code(probe, channel, bearer("tok-alice")) == ("OK", "")
            # Exactly one authorization header: a wrong one then the right one is refused,
            # and so is the right one twice.
            for pair in (("nope", "tok-alice"), ("tok-alice", "tok-alice")):
                twice = (*bearer(pair[0]), *bearer(pair[1]))
                assert await _code(probe, channel, twice) == (
                    "UNAUTHENTICATED",
                    "MULTIPLE_CREDENTIALS",
                )
            assert await _healthy(channel)  # health stays open
    finally:
        await running.stop(None)


@pytest.mark.parametrize("server", list(PROBES))
async def test_mutual_tls_names_the_principal(server: str, auth_files: Path) -> None:
    files = auth_files
    auth = AuthConfig(
        tls={
            "cert": str(files / "server_cert.pem"),
            "key": str(files / "server_key.pem"),
            "client_ca": str(files / "ca.pem"),
        },
        client_principals={"agent": "alice"},
    )
    running = await _start(server, auth, files)
    target = f"127.0.0.1:{running.port}"
    probe = PROBES[server]
    good = ClientTLS(files / "ca.pem", files / "client_cert.pem", files / "client_key.pem")
    foreign = ClientTLS(files / "other_ca.pem", files / "client_cert.pem", files / "client_key.pem")
    try:
        async with open_channel(target, good) as channel:
            assert await _code(probe, channel, ()) == ("OK", "")
        async with open_channel(target, foreign) as channel:
            code, _ = await _code(probe, channel, ())
            assert code == "UNAVAILABLE"  # the handshake fails: a CA it does not trust
        async with grpc.aio.insecure_channel(target) as channel:
            code, _ = await _code(probe, channel, ())
            assert code == "UNAVAILABLE"  # plaintext against TLS
    finally:
        await running.stop(None)


def test_a_token_over_plaintext_off_loopback_is_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import asyncio

    from hookmesh.services import Authenticator, start_server

    async def start_and_stop() -> None:
        running = await start_server([], "0.0.0.0:0", authenticator=Authenticator({"t": "a"}))
        await running.stop(None)

    with caplog.at_level(logging.WARNING, logger="hookmesh.server"):
        asyncio.run(start_and_stop())
    assert "over plaintext on a non-loopback address" in caplog.text
    assert "t" not in caplog.text.split("address")[0].split()  # the token is never logged


# --- tenancy --------------------------------------------------------------------------------


@pytest.fixture
async def agent(auth_files: Path) -> AsyncIterator[str]:
    auth = AuthConfig(token_env="HOOKMESH_TEST_TOKENS")
    running = await _start("agent", auth, auth_files)
    try:
        yield f"127.0.0.1:{running.port}"
    finally:
        await running.stop(None)


async def test_a_principal_sees_only_its_own_sessions(agent: str) -> None:
    async with (
        AgentClient(agent, timeout=SHORT_TIMEOUT, token="tok-alice") as alice,
        AgentClient(agent, timeout=SHORT_TIMEOUT, token="tok-bob") as bob,
    ):
        [e async for e in alice.reply("my secret plan", session_id="plans")]
        assert [s.session_id for s in (await alice.list_sessions())[0]] == ["plans"]
        assert (await bob.list_sessions())[0] == []
        for call in (
            bob.get_session("plans"),
            bob.delete_session("plans"),
            bob.interrupt("plans"),
        ):
            with pytest.raises(AgentClientError) as exc:
                await call
            assert (exc.value.code, exc.value.reason) == (
                grpc.StatusCode.NOT_FOUND,
                "SESSION_NOT_FOUND",
            )
        with pytest.raises(AgentClientError) as exc:
            [e async for e in bob.resume("plans", confirmations=[])]
        assert exc.value.reason == "SESSION_NOT_FOUND"
        # The same id is Bob's own session, apart from Alice's.
        [e async for e in bob.reply("hello", session_id="plans")]
        mine = await alice.get_session("plans")
        theirs = await bob.get_session("plans")
    assert "my secret plan" in str(mine.context[0]) and "secret" not in str(theirs.context)


async def test_a_principal_reads_only_its_own_memories(auth_files: Path) -> None:
    running = await _start("memory", AuthConfig(token_env="HOOKMESH_TEST_TOKENS"), auth_files)
    target = f"127.0.0.1:{running.port}"
    try:
        async with (
            MemoryClient(target, timeout=SHORT_TIMEOUT, token="tok-alice") as alice,
            MemoryClient(target, timeout=SHORT_TIMEOUT, token="tok-bob") as bob,
        ):
            added = await alice.add(MemoryScope("alice"), facts=["Alice's PIN is 4711."])
            memory_id = added.memories[0].memory.id
            for call in (
                bob.search("PIN", MemoryScope("alice")),
                bob.list(MemoryScope("alice")),
                bob.get("alice", memory_id),
                bob.delete("alice", memory_id),
            ):
                with pytest.raises(AgentClientError) as exc:
                    await call
                assert (exc.value.code, exc.value.reason) == (
                    grpc.StatusCode.PERMISSION_DENIED,
                    "USER_NOT_ALLOWED",
                )
            assert (await bob.list(MemoryScope("bob"))).memories == []
            hits = await alice.search("PIN", MemoryScope("alice"))
            assert [h.memory.id for h in hits] == [memory_id]
    finally:
        await running.stop(None)


async def test_knowledge_bases_are_searched_only_when_granted(
    auth_files: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = load_retrieval_config(
        None,
        store=f"sqlite:///{auth_files}/kb.db",
        auth={"token_env": "HOOKMESH_TEST_TOKENS"},
        access={"alice": {"write": ["handbook"]}, "bob": {"read": ["faq"], "write": ["faq"]}},
    )
    running = await start_retrieval_service(config, address="127.0.0.1:0")
    target = f"127.0.0.1:{running.port}"
    try:
        async with (
            RetrievalClient(target, timeout=SHORT_TIMEOUT, token="tok-alice") as alice,
            RetrievalClient(target, timeout=SHORT_TIMEOUT, token="tok-bob") as bob,
        ):
            await alice.create_knowledge_base("handbook")
            await alice.ingest("handbook", [Document("pay", "Salaries are paid monthly.")])
            await bob.create_knowledge_base("faq")
            with pytest.raises(AgentClientError) as exc:
                await bob.search("salaries", ["handbook"])
            assert (exc.value.code, exc.value.reason) == (
                grpc.StatusCode.PERMISSION_DENIED,
                "KNOWLEDGE_BASE_NOT_GRANTED",
            )
            assert await bob.search("salaries", []) == []  # every base it may read: faq only
            assert [kb.name for kb in await bob.list_knowledge_bases()] == ["faq"]
            with pytest.raises(AgentClientError) as exc:
                await bob.ingest("handbook", [Document("x", "Bob was here.")])
            assert exc.value.reason == "KNOWLEDGE_BASE_NOT_GRANTED"
            hits = await alice.search("salaries", ["handbook"])
            assert [h.document_id for h in hits] == ["pay"]
    finally:
        await running.stop(None)


async def test_only_a_trusted_gateway_names_the_user_and_only_once(auth_files: Path) -> None:
    config = load_memory_config(
        None,
        store=f"sqlite:///{auth_files}/memory.db",
        auth={"token_env": "HOOKMESH_TEST_TOKENS", "trusted_gateways": ["alice"]},
    )
    running = await start_memory_service(config, address="127.0.0.1:0")
    request = memory_pb2.ListMemoriesRequest(scope=memory_pb2.MemoryScope())

    async def list_as(metadata: Any) -> Any:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stub = memory_pb2_grpc.MemoryServiceStub(channel)
            return await stub.ListMemories(request, timeout=SHORT_TIMEOUT, metadata=metadata)

    for_carol = (("x-hookmesh-user", "carol"),)
    try:
        assert not (await list_as((*bearer("tok-alice"), *for_carol))).memories
        refusals = [
            ((*bearer("tok-bob"), *for_carol), "UNTRUSTED_GATEWAY"),
            (
                (*bearer("tok-alice"), *for_carol, ("x-hookmesh-user", "dave")),
                "INVALID_USER_HEADER",
            ),
        ]
        for metadata, reason in refusals:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await list_as(metadata)
            error = AgentClientError.from_rpc_error(refused.value)
            assert (error.code, error.reason) == (grpc.StatusCode.PERMISSION_DENIED, reason)
    finally:
        await running.stop(None)


async def test_with_ownership_a_base_is_its_creators_and_shared_by_grant(
    auth_files: Path,
) -> None:
    config = load_retrieval_config(
        None,
        store=f"sqlite:///{auth_files}/kb.db",
        auth={"token_env": "HOOKMESH_TEST_TOKENS"},
        ownership=True,
        access={"bob": {"read": ["handbook"]}},
    )
    running = await start_retrieval_service(config, address="127.0.0.1:0")
    target = f"127.0.0.1:{running.port}"
    not_granted = (grpc.StatusCode.PERMISSION_DENIED, "KNOWLEDGE_BASE_NOT_GRANTED")
    try:
        async with (
            RetrievalClient(target, timeout=SHORT_TIMEOUT, token="tok-alice") as alice,
            RetrievalClient(target, timeout=SHORT_TIMEOUT, token="tok-bob") as bob,
        ):
            for name in ("handbook", "diary"):
                await alice.create_knowledge_base(name)
                await alice.ingest(name, [Document(name, f"The {name} says salaries are paid.")])
            await bob.create_knowledge_base("notes")
            listed = {kb.name: kb.owner for kb in await bob.list_knowledge_bases()}
            assert listed == {"handbook": "alice", "notes": "bob"}
            refusals = [
                bob.search("salaries", ["diary"]),
                bob.search("salaries", ["ghost"]),  # a missing base: the same answer
                bob.delete_knowledge_base("handbook"),  # granted read only
                bob.delete_knowledge_base("diary"),
                bob.ingest("diary", [Document("x", "Bob was here.")]),
                alice.search("anything", ["notes"]),
            ]
            for refused_call in refusals:
                with pytest.raises(AgentClientError) as exc:
                    await refused_call
                assert (exc.value.code, exc.value.reason) == not_granted
            hits = await bob.search("salaries", [])  # every base it may read
            assert {h.knowledge_base for h in hits} == {"handbook"}
            await alice.delete_knowledge_base("diary")
            assert [kb.name for kb in await alice.list_knowledge_bases()] == ["handbook"]
    finally:
        await running.stop(None)
