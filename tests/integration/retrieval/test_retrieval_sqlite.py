"""The embedded SQLite store: durability across kill -9, reopening, the live dense index."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

from hookmesh.retrieval import (
    Document,
    Embedder,
    KnowledgeStore,
    SqliteKnowledgeStore,
    fts5_available,
    open_knowledge_store,
)
from tests.sqlite_writer import NOTES

pytestmark = pytest.mark.timeout(60)
SHORT_TIMEOUT = 30.0

ROOT = Path(__file__).resolve().parents[3]


async def test_a_returned_ingest_survives_kill_9(tmp_path: Path, embedder: Embedder) -> None:
    """A process crash loses no acknowledged write: the commits sit in the WAL file, which the
    kernel holds for the next opener. (Power loss is what `synchronous=FULL` is for; see the
    pragma test.)"""
    path = tmp_path / "kb.db"
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.sqlite_writer", str(path),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, cwd=ROOT,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        async with asyncio.timeout(SHORT_TIMEOUT):
            assert await process.stdout.readline() == b"committed\n"
        process.kill()  # SIGKILL: no close, no checkpoint, no atexit
        async with asyncio.timeout(SHORT_TIMEOUT):
            await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == -9
    wal_size = await asyncio.to_thread(os.path.getsize, f"{path}-wal")
    assert wal_size > 0  # the commits are still only in the WAL

    store = await SqliteKnowledgeStore.open(path, embedder)
    try:
        assert [d.id for d in await store.list_documents("kb")] == ["d0", "d2"]
        hits = await store.search("herons", ["kb"], mode="lexical")
        assert sorted(h.document_id for h in hits) == ["d0", "d2"]
        dense = await store.search(NOTES[2], ["kb"], mode="dense")
        assert dense[0].document_id == "d2" and dense[0].score == pytest.approx(1.0, abs=1e-5)
    finally:
        await store.close()


async def test_a_second_store_on_an_unclosed_file_sees_all_commits(
    tmp_path: Path, embedder: Embedder
) -> None:
    writer = await open_knowledge_store(f"sqlite:///{tmp_path}/kb.db", embedder)
    reader: KnowledgeStore | None = None
    try:
        await writer.create_knowledge_base("kb")
        await writer.ingest("kb", [Document("a", "Herons stand still in shallow water.")])
        reader = await open_knowledge_store(f"sqlite:///{tmp_path}/kb.db", embedder)
        (hit,) = await reader.search("wading bird", ["kb"], mode="dense", top_k=1)
        assert hit.document_id == "a"
    finally:
        await writer.close()
        if reader is not None:
            await reader.close()


async def test_the_dense_index_follows_writes_after_loading(
    tmp_path: Path, embedder: Embedder
) -> None:
    url = f"sqlite:///{tmp_path}/kb.db"
    store = await open_knowledge_store(url, embedder)
    try:
        await store.create_knowledge_base("kb")
        await store.ingest("kb", [Document("owl", "Owls hunt at night with silent flight.")])
        assert [
            h.document_id for h in await store.search("nocturnal bird", ["kb"], mode="dense")
        ] == ["owl"]  # the index is now loaded; from here on it is updated in place
        await store.ingest(
            "kb",
            [
                Document("bat", "Bats navigate in the dark by echolocation."),
                Document("owl", "Owls are birds of prey that hunt at night."),
            ],
        )
        await store.delete_document("kb", "bat")
        await store.ingest("kb", [Document("mole", "Moles dig tunnels underground.")])
        live = await store.search("animal active at night", ["kb"], mode="dense", top_k=10)
        assert sorted(h.document_id for h in live) == ["mole", "owl"]
        assert next(h for h in live if h.document_id == "owl").text.startswith("Owls are birds")
    finally:
        await store.close()
    fresh = await open_knowledge_store(url, embedder)  # loads the index from disk
    try:
        reloaded = await fresh.search("animal active at night", ["kb"], mode="dense", top_k=10)
        assert [(h.chunk_id, round(h.score, 5)) for h in reloaded] == [
            (h.chunk_id, round(h.score, 5)) for h in live
        ]
    finally:
        await fresh.close()


async def test_every_connection_is_wal_with_synchronous_full_and_fts5(
    tmp_path: Path, embedder: Embedder
) -> None:
    """`synchronous` is per connection, so it is read from the store's own worker
    connections: FULL (2) makes SQLite fsync the WAL at every commit, which is what carries
    an acknowledged write through an OS crash or power loss (no test can cut the power)."""
    assert fts5_available()  # the stdlib sqlite3 here has FTS5: no extra package needed
    store = await SqliteKnowledgeStore.open(tmp_path / "sub/dir/kb.db", embedder, threads=2)
    database = store.database

    def pragmas() -> tuple[Any, Any]:
        db = database.connection()
        return db.execute("PRAGMA journal_mode").fetchone(), db.execute(
            "PRAGMA synchronous"
        ).fetchone()

    try:
        seen = await asyncio.gather(*(database.run(pragmas) for _ in range(8)))
        assert set(seen) == {(("wal",), (2,))}
    finally:
        await store.close()
    db = sqlite3.connect(tmp_path / "sub/dir/kb.db")
    try:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)  # kept in the file
    finally:
        db.close()
    with pytest.raises(RuntimeError, match="closed"):
        await store.list_knowledge_bases()


async def test_unsupported_urls_do_not_echo_secrets(embedder: Embedder) -> None:
    with pytest.raises(ValueError, match="'mysql'") as caught:
        await open_knowledge_store("mysql://user:hunter2@db/x", embedder)
    assert "hunter2" not in str(caught.value)


async def test_a_file_from_before_owners_opens_with_ownerless_bases(
    tmp_path: Path, embedder: Embedder
) -> None:
    path = tmp_path / "old.db"
    store = await open_knowledge_store(f"sqlite:///{path}", embedder)
    await store.create_knowledge_base("old", owner="alice")
    await store.close()
    with sqlite3.connect(path) as db:  # the schema as it was: no owner column
        db.execute("ALTER TABLE knowledge_bases DROP COLUMN owner")
    store = await open_knowledge_store(f"sqlite:///{path}", embedder)
    try:
        assert [(kb.name, kb.owner) for kb in await store.list_knowledge_bases()] == [("old", "")]
        assert (await store.create_knowledge_base("new", owner="bob")).owner == "bob"
    finally:
        await store.close()
