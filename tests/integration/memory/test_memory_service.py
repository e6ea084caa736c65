"""The memory service over real gRPC on loopback, on SQLite and PostgreSQL: every RPC, bad
input with rich errors, unknown ids, users in parallel, restarts, extraction, health."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
import pytest
from google.protobuf import struct_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from grpc_status import rpc_status

from hookmesh.client import AgentClientError, MemoryClient
from hookmesh.errors import field_violations_of, reason_of
from hookmesh.memory import MemoryScope
from hookmesh.schema import make_assistant, make_user_text
from hookmesh.services.memory import (
    SERVICE_NAME,
    MemoryService,
    MemoryServiceConfig,
    load_memory_config,
    start_memory_service,
)
from hookmesh.v1 import memory_pb2 as pb
from hookmesh.v1 import memory_pb2_grpc as pb_grpc
from tests.integration.memory.conftest import MemoryBackend
from tests.servers import stopped_at_exit, target

pytestmark = pytest.mark.timeout(90)

SHORT_TIMEOUT = 30.0
Start = Callable[..., Awaitable[MemoryService]]


@pytest.fixture
async def start(backend: MemoryBackend) -> AsyncIterator[Start]:
    """Start memory services on 127.0.0.1:0 on the test's backend; stopped at the end."""

    async def run(**config: Any) -> MemoryService:
        settings = load_memory_config(None, **backend.config(grace_seconds=0.5, **config))
        return await start_memory_service(settings, address="127.0.0.1:0")

    async with stopped_at_exit(run) as started:
        yield started


def extraction_model(*answers: str) -> dict[str, Any]:
    """A scripted extraction model config answering `answers` in turn (then again)."""
    return {"type": "scripted", "turns": list(answers), "stream": False}


async def test_every_rpc_through_the_client(start: Start) -> None:
    service = await start()
    scope = MemoryScope("alice", "cook", "s1")
    async with MemoryClient(target(service), timeout=SHORT_TIMEOUT) as memory:
        added = await memory.add(
            scope, facts=["The user is vegetarian.", "The user lives in Lisbon."], metadata={"n": 2}
        )
        assert [m.outcome for m in added.memories] == ["created", "created"]
        veg = added.memories[0].memory
        assert veg.scope == scope and veg.metadata == {"n": 2} and veg.origin == "fact"
        merged = await memory.add(scope, facts=["The user is a vegetarian."])
        assert (merged.memories[0].outcome, merged.memories[0].memory.id) == ("merged", veg.id)
        hits = await memory.search("what does the user eat?", MemoryScope("alice"), top_k=1)
        assert [h.memory.id for h in hits] == [veg.id] and hits[0].similarity is not None
        assert await memory.get("alice", veg.id) == (await memory.list(scope)).memories[0]
        changed = await memory.update("alice", veg.id, text="The user is vegan.", metadata={})
        assert changed.text == "The user is vegan." and changed.metadata == {}
        await memory.delete("alice", veg.id)
        page = await memory.list(MemoryScope("alice"))
        assert [m.text for m in page.memories] == ["The user lives in Lisbon."]
        assert await memory.delete_all(MemoryScope("alice")) == 1
        assert (await memory.list(MemoryScope("alice"))).memories == []


def _status(error: grpc.aio.AioRpcError) -> Any:
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    assert status is not None
    return status


BAD: list[tuple[str, str, Any, str, list[str]]] = [
    (
        "AddMemories",
        "no user",
        pb.AddMemoriesRequest(facts=["x"]),
        "INVALID_SCHEMA",
        ["scope.user_id"],
    ),
    (
        "AddMemories",
        "empty text",
        pb.AddMemoriesRequest(scope=pb.MemoryScope(user_id="u"), facts=["fine", ""]),
        "INVALID_SCHEMA",
        ["facts[1]"],
    ),
    (
        "AddMemories",
        "nested metadata",
        pb.AddMemoriesRequest(
            scope=pb.MemoryScope(user_id="u"),
            facts=["x"],
            metadata=struct_pb2.Struct(fields={"k": struct_pb2.Value(list_value={})}),
        ),
        "INVALID_SCHEMA",
        ["metadata[k]"],
    ),
    (
        "SearchMemories",
        "top_k out of range",
        pb.SearchMemoriesRequest(query="q", scope=pb.MemoryScope(user_id="u"), top_k=51),
        "INVALID_SCHEMA",
        ["top_k"],
    ),
    (
        "SearchMemories",
        "everything wrong",
        pb.SearchMemoriesRequest(query=" ", top_k=-3, score_threshold=1.5),
        "INVALID_SCHEMA",
        ["scope.user_id"],
    ),
    (
        "ListMemories",
        "bad token",
        pb.ListMemoriesRequest(scope=pb.MemoryScope(user_id="u"), page_token="zz"),
        "INVALID_SCHEMA",
        ["page_token"],
    ),
    (
        "GetMemory",
        "bad id",
        pb.GetMemoryRequest(user_id="u", memory_id="42"),
        "INVALID_SCHEMA",
        ["memory_id"],
    ),
    (
        "UpdateMemory",
        "blank text",
        pb.UpdateMemoryRequest(user_id="u", memory_id="0" * 32, text=" "),
        "INVALID_SCHEMA",
        ["text"],
    ),
    (
        "DeleteAllMemories",
        "no user",
        pb.DeleteAllMemoriesRequest(),
        "INVALID_SCHEMA",
        ["scope.user_id"],
    ),
    (
        "AddMemories",
        "too large",
        pb.AddMemoriesRequest(scope=pb.MemoryScope(user_id="u"), facts=["x" * 5000] * 300),
        "REQUEST_TOO_LARGE",
        ["facts"],
    ),
]


@pytest.mark.parametrize(
    ("rpc", "case", "request_pb", "reason", "fields"), BAD, ids=[b[1] for b in BAD]
)
async def test_bad_requests_are_invalid_argument_with_details(
    start: Start, rpc: str, case: str, request_pb: Any, reason: str, fields: list[str]
) -> None:
    service = await start(max_request_bytes=1024 * 1024)
    async with grpc.aio.insecure_channel(target(service)) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await getattr(pb_grpc.MemoryServiceStub(channel), rpc)(
                request_pb, timeout=SHORT_TIMEOUT
            )
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        status = _status(caught.value)
        assert reason_of(status) == reason
        assert [v.field for v in field_violations_of(status)][: len(fields)] == fields
        # The server is still serving.
        health = health_pb2_grpc.HealthStub(channel)
        ok = await health.Check(health_pb2.HealthCheckRequest(service=SERVICE_NAME), timeout=5)
        assert ok.status == health_pb2.HealthCheckResponse.SERVING


async def test_unknown_and_foreign_ids_are_not_found(start: Start) -> None:
    service = await start()
    async with MemoryClient(target(service), timeout=SHORT_TIMEOUT) as memory:
        mine = (await memory.add(MemoryScope("alice"), facts=["The user hums."])).memories[0]
        for call in (
            memory.get("alice", "f" * 32),
            memory.update("alice", "f" * 32, text="x"),
            memory.delete("alice", "f" * 32),
            memory.get("bob", mine.memory.id),
            memory.delete("bob", mine.memory.id),
        ):
            with pytest.raises(AgentClientError) as caught:
                await call
            assert caught.value.code == grpc.StatusCode.NOT_FOUND
            assert caught.value.reason == "MEMORY_NOT_FOUND"
        assert (await memory.get("alice", mine.memory.id)).text == "The user hums."


def _drop_documents(path: str) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("DROP TABLE documents")
    finally:
        db.close()


async def test_a_missing_table_is_an_internal_error_not_an_outage(
    start: Start, backend: MemoryBackend
) -> None:
    """A schema gone from under the service is a fault to fix, not "retry later"."""
    service = await start()
    async with MemoryClient(target(service), timeout=SHORT_TIMEOUT) as memory:
        mine = (await memory.add(MemoryScope("alice"), facts=["The user hums."])).memories[0]
        if backend.name == "sqlite":
            await asyncio.to_thread(_drop_documents, backend.url.removeprefix("sqlite:///"))
        else:
            import psycopg

            async with await psycopg.AsyncConnection.connect(backend.url, autocommit=True) as conn:
                await conn.execute(f"DROP TABLE {backend.namespace}.documents CASCADE")  # type: ignore[arg-type]
        with pytest.raises(AgentClientError) as caught:
            await memory.get("alice", mine.memory.id)
        assert (caught.value.code, caught.value.reason) == (grpc.StatusCode.INTERNAL, "INTERNAL")
        assert "documents" not in str(caught.value)  # no internals in the message
        async with grpc.aio.insecure_channel(target(service)) as channel:
            health = health_pb2_grpc.HealthStub(channel)
            reply = await health.Check(health_pb2.HealthCheckRequest(), timeout=SHORT_TIMEOUT)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING


async def test_users_in_parallel_never_see_each_others_memories(start: Start) -> None:
    service = await start()
    users = [f"user-{i}" for i in range(6)]
    pets = ["cat", "dog", "parrot", "hamster", "goldfish", "tortoise"]

    async def one(user: str, pet: str, memory: MemoryClient) -> None:
        scope = MemoryScope(user)
        await memory.add(scope, facts=[f"The user has a pet {pet}.", f"The user's code is {user}."])
        for _ in range(3):
            hits = await memory.search("which pet does the user have?", scope, top_k=10)
            assert {h.memory.scope.user_id for h in hits} == {user}
            assert hits[0].memory.text == f"The user has a pet {pet}."
            listed = await memory.list(scope)
            assert {m.scope.user_id for m in listed.memories} == {user}
            assert len(listed.memories) == 2

    async with MemoryClient(target(service), timeout=SHORT_TIMEOUT) as memory:
        async with asyncio.timeout(SHORT_TIMEOUT):
            await asyncio.gather(*(one(u, p, memory) for u, p in zip(users, pets, strict=True)))


async def test_memories_survive_a_restart(start: Start) -> None:
    first = await start()
    async with MemoryClient(target(first), timeout=SHORT_TIMEOUT) as memory:
        added = await memory.add(MemoryScope("alice", "cook"), facts=["The user hates cilantro."])
    await first.stop(1.0)
    second = await start()
    async with MemoryClient(target(second), timeout=SHORT_TIMEOUT) as memory:
        hits = await memory.search("herbs the user dislikes", MemoryScope("alice"))
        assert [h.memory for h in hits] == [added.memories[0].memory]
        again = await memory.add(MemoryScope("alice", "cook"), facts=["The user hates cilantro."])
        assert again.memories[0].outcome == "merged"


async def test_extraction_by_the_configured_model(start: Start) -> None:
    facts = json.dumps({"facts": ["The user is learning Japanese."]})
    service = await start(model=extraction_model(facts, "I think the user likes tea!"))
    turn = [
        make_user_text("agentic", "I've started Japanese lessons.", id="u1"),
        make_assistant("agentic", "頑張って!", id="a1"),
    ]
    async with MemoryClient(target(service), timeout=SHORT_TIMEOUT) as memory:
        good = await memory.add(MemoryScope("alice"), messages=turn)
        assert good.extraction == "extracted"
        assert [(m.memory.text, m.memory.origin) for m in good.memories] == [
            ("The user is learning Japanese.", "extracted")
        ]
        assert good.memories[0].memory.source_message_ids == ("u1", "a1")
        # The scripted model's next answer is not JSON: the turn is kept verbatim.
        bad = await memory.add(
            MemoryScope("alice"), messages=[make_user_text("flat", "I drink tea daily.", id="u2")]
        )
        assert bad.extraction == "fallback"
        assert [(m.memory.text, m.memory.origin) for m in bad.memories] == [
            ("I drink tea daily.", "verbatim")
        ]


async def test_health_and_reflection(start: Start) -> None:
    service = await start()
    async with grpc.aio.insecure_channel(target(service)) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        ok = await health.Check(health_pb2.HealthCheckRequest(service=SERVICE_NAME), timeout=5)
        assert ok.status == health_pb2.HealthCheckResponse.SERVING
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)

        async def ask() -> AsyncIterator[reflection_pb2.ServerReflectionRequest]:
            yield reflection_pb2.ServerReflectionRequest(list_services="")

        call = stub.ServerReflectionInfo(ask(), timeout=5)
        async with asyncio.timeout(SHORT_TIMEOUT):
            response = await call.read()
        names = [s.name for s in response.list_services_response.service]
        assert SERVICE_NAME in names
        call.cancel()


def test_config_defaults_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    default = MemoryServiceConfig()
    assert default.listen == "127.0.0.1:7004" and default.dedup_threshold == 0.95
    assert default.model is None
    with pytest.raises(ValueError, match="dedup_threshold"):
        load_memory_config(None, dedup_threshold=0)
    monkeypatch.setenv("HOOKMESH_MEMORY_DEDUP_THRESHOLD", "0.9")
    monkeypatch.setenv("HOOKMESH_MEMORY_MODEL__TYPE", "scripted")
    config = load_memory_config(None, listen="127.0.0.1:0")
    assert config.dedup_threshold == 0.9 and config.model is not None
    assert config.model.type == "scripted"
