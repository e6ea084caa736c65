"""Documents record the user who ingested them, so one user's documents can be listed and
erased across bases (others' stay, in shared bases too), and a store made before owners
were recorded opens with its documents readable and unowned. SQLite and PostgreSQL."""

from __future__ import annotations

import sqlite3

import pytest

from hookmesh.retrieval import Document, KnowledgeStore
from tests.integration.retrieval.conftest import Backend

pytestmark = pytest.mark.timeout(120)


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
