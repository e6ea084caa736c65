"""Documents record the user who ingested them, so one user's documents can be listed and
erased across bases (others' stay, in shared bases too), and a store made before owners
were recorded opens with its documents readable and unowned. SQLite and PostgreSQL."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import grpc
import pytest

from hookmesh.client import RetrievalClient
from hookmesh.retrieval import Document, Embedder, KnowledgeStore
from hookmesh.services.retrieval import load_retrieval_config, start_retrieval_service
from hookmesh.v1 import retrieval_pb2, retrieval_pb2_grpc
from tests.integration.retrieval.conftest import Backend

pytestmark = pytest.mark.timeout(120)

SHORT = 20.0


async def _all_pages(store: KnowledgeStore, owner: str, size: int) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    after = None
    while True:
        docs, after = await store.owned_page(owner, size, after)
        found += [(d.knowledge_base, d.id) for d in docs]
        if after is None:
            return found


async def test_documents_are_listed_and_erased_by_owner(store: KnowledgeStore) -> None:
    await store.create_knowledge_base("shared", owner="alice")
    await store.create_knowledge_base("diary", owner="alice")
    await store.ingest("shared", [Document("a1", "alice plants tulips")], owner="alice")
    await store.ingest("diary", [Document("a2", "alice dreams"), Document("a3", "of tulips")],
                       owner="alice")  # fmt: skip
    await store.ingest("shared", [Document("b1", "bob plants tulips")], owner="bob")
    await store.ingest("shared", [Document("x", "a document of the service")])
    mine = [("diary", "a2"), ("diary", "a3"), ("shared", "a1")]
    for size in (1, 2, 100):
        assert await _all_pages(store, "alice", size) == mine
    # An unchanged re-ingest by someone else keeps the owner; a new text is the writer's.
    await store.ingest("shared", [Document("a1", "alice plants tulips")], owner="bob")
    await store.ingest("diary", [Document("a3", "bob rewrote this")], owner="bob")
    assert await _all_pages(store, "alice", 100) == [("diary", "a2"), ("shared", "a1")]
    assert await store.forget_owner("alice") == 2
    assert await store.forget_owner("alice") == 0
    assert await _all_pages(store, "alice", 100) == []
    assert await _all_pages(store, "bob", 100) == [("diary", "a3"), ("shared", "b1")]
    hits = await store.search("tulips", ["shared", "diary"], mode="lexical", top_k=10)
    assert sorted(h.document_id for h in hits) == ["b1"]
    assert (await store.get_document("shared", "x")).text == "a document of the service"


async def test_a_store_from_before_owners_opens_with_its_documents(backend: Backend) -> None:
    store = await backend.open()
    await store.create_knowledge_base("old")
    await store.ingest("old", [Document("d", "written before owners")], owner="alice")
    await store.close()
    if backend.name == "sqlite":
        with sqlite3.connect(backend.url.removeprefix("sqlite:///")) as db:
            db.execute("DROP INDEX documents_by_owner")
            db.execute("ALTER TABLE documents DROP COLUMN owner")
    else:
        import psycopg

        reopened = await backend.open()
        namespace = reopened.namespace  # type: ignore[attr-defined]
        await reopened.close()
        async with await psycopg.AsyncConnection.connect(backend.url, autocommit=True) as conn:
            await conn.execute(f"ALTER TABLE {namespace}.documents DROP COLUMN owner CASCADE")
    store = await backend.open()
    assert (await store.get_document("old", "d")).text == "written before owners"
    assert await _all_pages(store, "alice", 10) == []
    await store.ingest("old", [Document("d", "written after")], owner="alice")
    assert await _all_pages(store, "alice", 10) == [("old", "d")]


async def test_a_service_that_checks_no_credentials_lists_and_erases_no_ones_documents(
    tmp_path: Path, embedder: Embedder
) -> None:
    """Without credentials every caller is ``anonymous``: what they ingest is no one's, so
    forgetting a user (the agent names them in ``x-hookmesh-user``) erases nothing rather
    than every document."""
    config = load_retrieval_config(None, store=f"sqlite:///{tmp_path}/kb.db")
    service = await start_retrieval_service(config, address="127.0.0.1:0", embedder=embedder)
    address = f"127.0.0.1:{service.port}"
    try:
        async with RetrievalClient(address, timeout=SHORT) as kb:
            await kb.create_knowledge_base("notes")
            await kb.ingest("notes", [Document("d1", "alice plants tulips"), Document("d2", "bob")])
            async with grpc.aio.insecure_channel(address) as channel:
                stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
                as_alice = (("x-hookmesh-user", "alice"),)
                listed = await stub.ListUserDocuments(
                    retrieval_pb2.ListUserDocumentsRequest(), metadata=as_alice, timeout=SHORT
                )
                deleted = await stub.DeleteUserDocuments(
                    retrieval_pb2.DeleteUserDocumentsRequest(), metadata=as_alice, timeout=SHORT
                )
            assert (list(listed.documents), deleted.deleted_count) == ([], 0)
            assert await kb.list_user_documents() == ([], "")
            assert await kb.delete_user_documents() == 0
            kept = [(await kb.get_document("notes", i)).text for i in ("d1", "d2")]
        assert kept == ["alice plants tulips", "bob"]
    finally:
        await service.stop(None)
