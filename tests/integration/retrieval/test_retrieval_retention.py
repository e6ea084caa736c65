"""Retention of documents: a sweep deletes those last written before its cutoff (oldest
first, in bounded rounds) and keeps the rest; the retrieval service sweeps at start with its
clock. SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import UTC, datetime, timedelta

import pytest

from hookmesh.retrieval import Document, Embedder, KnowledgeStore
from hookmesh.server import RetentionConfig, Sweeper
from hookmesh.services.retrieval import load_retrieval_config, start_retrieval_service
from tests.integration.retrieval.conftest import Backend

pytestmark = pytest.mark.timeout(120)


async def _age(backend: Backend, store: KnowledgeStore, document_id: str, days: int) -> None:
    """Backdate a document's last write, in the database itself."""
    when = datetime.now(UTC) - timedelta(days=days)
    if backend.name == "sqlite":
        with sqlite3.connect(backend.url.removeprefix("sqlite:///")) as db:
            db.execute(
                "UPDATE documents SET update_time = ? WHERE document_id = ?",
                (when.isoformat(), document_id),
            )
        return
    import psycopg

    namespace = store.namespace  # type: ignore[attr-defined]
    async with await psycopg.AsyncConnection.connect(backend.url, autocommit=True) as conn:
        await conn.execute(
            f"UPDATE {namespace}.documents SET update_time = %s WHERE document_id = %s",
            (when, document_id),
        )


async def _ids(store: KnowledgeStore, base: str) -> list[str]:
    return [d.id for d in await store.list_documents(base, limit=100)]


async def test_a_sweep_deletes_what_is_older_than_its_cutoff_in_bounded_rounds(
    backend: Backend,
) -> None:
    store = await backend.open()
    await store.create_knowledge_base("notes")
    await store.ingest("notes", [Document(f"old{i}", f"old note {i}") for i in range(5)])
    await store.ingest("notes", [Document("new", "a fresh note")])
    for i in range(5):
        await _age(backend, store, f"old{i}", days=10 + i)
    cutoff = datetime.now(UTC) - timedelta(days=1)
    assert await store.sweep(cutoff, 2) == 2  # the oldest two, no more
    assert await _ids(store, "notes") == ["new", "old0", "old1", "old2"]
    ticks = [datetime.now(UTC)]
    sweeper = Sweeper.of(
        "retrieval.documents",
        store.sweep,
        RetentionConfig(ttl_seconds=86400, batch=2),
        clock=lambda: ticks[-1],
    )
    assert await sweeper.run_once() == 3
    assert await _ids(store, "notes") == ["new"]
    ticks.append(datetime.now(UTC) + timedelta(days=2))  # two days on, "new" is old too
    assert await sweeper.run_once() == 1
    assert await _ids(store, "notes") == []
    hits = await store.search("note", ["notes"], mode="lexical")
    assert hits == []


async def test_the_service_sweeps_at_start(backend: Backend, embedder: Embedder) -> None:
    store = await backend.open()
    await store.create_knowledge_base("notes")
    await store.ingest("notes", [Document("old", "an old note"), Document("new", "a new note")])
    await _age(backend, store, "old", days=3)
    namespace = getattr(store, "namespace", "retrieval")
    await store.close()
    config = load_retrieval_config(
        None, store=backend.url, namespace=namespace, retention={"ttl_seconds": 86400}
    )
    service = await start_retrieval_service(config, address="127.0.0.1:0", embedder=embedder)
    try:
        async with asyncio.timeout(30):
            await service.retention.swept.wait()
        assert await _ids(service.store, "notes") == ["new"]
    finally:
        await service.stop(None)
