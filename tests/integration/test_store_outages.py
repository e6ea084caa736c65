"""Every RPC of the memory and retrieval services answers an outage of its PostgreSQL store
with UNAVAILABLE ``STORE_UNAVAILABLE`` (not INTERNAL), and serves on once the store is back.

The outage is real: just before each call the test ends every connection the service holds
(named by `application_name`), as a failover does, so the call meets a dead connection."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import grpc
import psycopg
import pytest

from hookmesh.errors import reason_of, status_of
from hookmesh.services.memory import load_memory_config, start_memory_service
from hookmesh.services.retrieval import load_retrieval_config, start_retrieval_service
from hookmesh.v1 import memory_pb2, memory_pb2_grpc, retrieval_pb2, retrieval_pb2_grpc
from tests.agent_helpers import SHORT_TIMEOUT

pytestmark = pytest.mark.timeout(120)

Call = Callable[[Any], Awaitable[Any]]


@asynccontextmanager
async def _service(
    postgres_url: str, kind: str, **settings: Any
) -> AsyncIterator[tuple[grpc.aio.Channel, Any]]:
    """A memory or retrieval service (with `settings`) on its own schema of the test
    PostgreSQL; yields a channel to it and a function that ends every connection the service
    holds."""
    application = f"outage_{uuid.uuid4().hex[:8]}"
    namespace = f"o_{uuid.uuid4().hex[:12]}"
    store = f"{postgres_url}?application_name={application}"
    if kind == "memory":
        config: Any = load_memory_config(None, store=store, namespace=namespace)
        running: Any = await start_memory_service(config, address="127.0.0.1:0")
    else:
        config = load_retrieval_config(None, store=store, namespace=namespace, **settings)
        running = await start_retrieval_service(config, address="127.0.0.1:0")

    async def cut() -> None:
        async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
            cursor = await conn.execute(
                "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity"
                " WHERE application_name = %s",
                (application,),
            )
            ended = [row[0] for row in await cursor.fetchall()]
        assert ended and all(ended)

    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            yield channel, cut
    finally:
        await running.stop(None)
        async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
            await conn.execute(f"DROP SCHEMA IF EXISTS {namespace} CASCADE")  # type: ignore[arg-type]


async def _unavailable(call: Awaitable[Any]) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    status = status_of(caught.value)
    assert (caught.value.code(), reason_of(status) if status else "") == (
        grpc.StatusCode.UNAVAILABLE,
        "STORE_UNAVAILABLE",
    )


async def _served(call: Call, stub: Any) -> Any:
    """`call`'s answer once the store is back: the service drops each dead pooled connection
    as it meets it (UNAVAILABLE), so the call succeeds within a few tries."""
    for _ in range(5):
        try:
            return await call(stub)
        except grpc.aio.AioRpcError as exc:
            if exc.code() != grpc.StatusCode.UNAVAILABLE:
                raise
    raise AssertionError("the service did not serve again after the outage")


_SCOPE = memory_pb2.MemoryScope(user_id="alice")
_ID = "0" * 32
MEMORY_CALLS: dict[str, Call] = {
    "AddMemories": lambda s: s.AddMemories(
        memory_pb2.AddMemoriesRequest(scope=_SCOPE, facts=["x"]), timeout=SHORT_TIMEOUT
    ),
    "SearchMemories": lambda s: s.SearchMemories(
        memory_pb2.SearchMemoriesRequest(query="x", scope=_SCOPE), timeout=SHORT_TIMEOUT
    ),
    "ListMemories": lambda s: s.ListMemories(
        memory_pb2.ListMemoriesRequest(scope=_SCOPE), timeout=SHORT_TIMEOUT
    ),
    "GetMemory": lambda s: s.GetMemory(
        memory_pb2.GetMemoryRequest(user_id="alice", memory_id=_ID), timeout=SHORT_TIMEOUT
    ),
    "UpdateMemory": lambda s: s.UpdateMemory(
        memory_pb2.UpdateMemoryRequest(user_id="alice", memory_id=_ID, text="y"),
        timeout=SHORT_TIMEOUT,
    ),
    "DeleteMemory": lambda s: s.DeleteMemory(
        memory_pb2.DeleteMemoryRequest(user_id="alice", memory_id=_ID), timeout=SHORT_TIMEOUT
    ),
    "DeleteAllMemories": lambda s: s.DeleteAllMemories(
        memory_pb2.DeleteAllMemoriesRequest(scope=_SCOPE), timeout=SHORT_TIMEOUT
    ),
}


async def _one_document() -> AsyncIterator[retrieval_pb2.IngestRequest]:
    yield retrieval_pb2.IngestRequest(
        knowledge_base="kb", document=retrieval_pb2.Document(id="d", text="Some text.")
    )


RETRIEVAL_CALLS: dict[str, Call] = {
    "CreateKnowledgeBase": lambda s: s.CreateKnowledgeBase(
        retrieval_pb2.CreateKnowledgeBaseRequest(name="other"), timeout=SHORT_TIMEOUT
    ),
    "ListKnowledgeBases": lambda s: s.ListKnowledgeBases(
        retrieval_pb2.ListKnowledgeBasesRequest(), timeout=SHORT_TIMEOUT
    ),
    "DeleteKnowledgeBase": lambda s: s.DeleteKnowledgeBase(
        retrieval_pb2.DeleteKnowledgeBaseRequest(name="kb"), timeout=SHORT_TIMEOUT
    ),
    "Ingest": lambda s: s.Ingest(_one_document(), timeout=SHORT_TIMEOUT),
    "Search": lambda s: s.Search(
        retrieval_pb2.SearchRequest(query="text", knowledge_bases=["kb"]), timeout=SHORT_TIMEOUT
    ),
    "GetDocument": lambda s: s.GetDocument(
        retrieval_pb2.GetDocumentRequest(knowledge_base="kb", document_id="d"),
        timeout=SHORT_TIMEOUT,
    ),
    "DeleteDocument": lambda s: s.DeleteDocument(
        retrieval_pb2.DeleteDocumentRequest(knowledge_base="kb", document_id="d"),
        timeout=SHORT_TIMEOUT,
    ),
}


async def test_every_memory_rpc_answers_an_outage_unavailable(postgres_url: str) -> None:
    async with _service(postgres_url, "memory") as (channel, cut):
        stub = memory_pb2_grpc.MemoryServiceStub(channel)
        for call in MEMORY_CALLS.values():
            listed = await _served(MEMORY_CALLS["ListMemories"], stub)
            assert list(listed.memories) == []
            await cut()
            await _unavailable(call(stub))


async def test_every_retrieval_rpc_answers_an_outage_unavailable(postgres_url: str) -> None:
    async with _service(postgres_url, "retrieval") as (channel, cut):
        stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
        await stub.CreateKnowledgeBase(
            retrieval_pb2.CreateKnowledgeBaseRequest(name="kb"), timeout=SHORT_TIMEOUT
        )
        for call in RETRIEVAL_CALLS.values():
            listed = await _served(RETRIEVAL_CALLS["ListKnowledgeBases"], stub)
            assert [kb.name for kb in listed.knowledge_bases] == ["kb"]
            await cut()
            await _unavailable(call(stub))


ALICE = (("authorization", "Bearer tok-alice"),)

USER_CALLS: dict[str, Call] = {
    "ListUserDocuments": lambda s: s.ListUserDocuments(
        retrieval_pb2.ListUserDocumentsRequest(), metadata=ALICE, timeout=SHORT_TIMEOUT
    ),
    "DeleteUserDocuments": lambda s: s.DeleteUserDocuments(
        retrieval_pb2.DeleteUserDocumentsRequest(), metadata=ALICE, timeout=SHORT_TIMEOUT
    ),
}


async def test_a_users_document_rpcs_answer_an_outage_unavailable(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With credentials checked (without, the caller owns nothing and the store is not read)."""
    monkeypatch.setenv("HOOKMESH_TEST_TOKENS", "alice:tok-alice")
    auth = {"token_env": "HOOKMESH_TEST_TOKENS"}
    async with _service(postgres_url, "retrieval", auth=auth) as (channel, cut):
        stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
        for call in USER_CALLS.values():
            listed = await _served(USER_CALLS["ListUserDocuments"], stub)
            assert list(listed.documents) == []
            await cut()
            await _unavailable(call(stub))
