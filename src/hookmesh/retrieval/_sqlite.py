"""The embedded store: SQLite (WAL) for everything, FTS5 for lexical search, and an exact
in-memory numpy index per knowledge base for dense search."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from ._backend import (
    ChunkRow,
    DocumentWrite,
    ExistingDocument,
    Filter,
    KnowledgeBaseRef,
    dump_metadata,
)
from ._dense import DenseIndex
from ._embedder import Embedder
from ._limits import knowledge_base_exists
from ._sqlitedb import SqliteDatabase, fts5_available
from ._store import KnowledgeStore
from ._types import ChunkingOptions, KnowledgeBase, StoredDocument

_SCHEMA = """
CREATE TABLE IF NOT EXISTS knowledge_bases (
    id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL UNIQUE, description TEXT NOT NULL,
    max_tokens INTEGER NOT NULL, overlap_tokens INTEGER NOT NULL, embedder TEXT NOT NULL,
    dimension INTEGER NOT NULL, create_time TEXT NOT NULL, owner TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS documents (
    id INTEGER PRIMARY KEY AUTOINCREMENT, kb_id INTEGER NOT NULL, document_id TEXT NOT NULL,
    text TEXT NOT NULL, metadata TEXT NOT NULL, content_hash TEXT NOT NULL,
    chunk_count INTEGER NOT NULL, create_time TEXT NOT NULL, update_time TEXT NOT NULL,
    owner TEXT NOT NULL DEFAULT '', UNIQUE (kb_id, document_id));
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY AUTOINCREMENT, kb_id INTEGER NOT NULL, doc_key INTEGER NOT NULL,
    chunk_index INTEGER NOT NULL, start_char INTEGER NOT NULL, end_char INTEGER NOT NULL,
    text TEXT NOT NULL, embedding BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS chunks_by_doc ON chunks (doc_key, chunk_index);
CREATE INDEX IF NOT EXISTS chunks_by_kb ON chunks (kb_id, id);
"""
# NOTE(retrieval): one FTS5 table per knowledge base, so bm25's corpus statistics are the
# base's own and a search reads only its postings. External content: text is stored once.
_FTS = (
    "CREATE VIRTUAL TABLE fts_{key} USING fts5(text, content='chunks', content_rowid='id',"
    " tokenize='porter unicode61 remove_diacritics 2')"
)
_KB_COLUMNS = "k.id, k.name, k.description, k.max_tokens, k.overlap_tokens, k.embedder, k.dimension"
_KB_READ = (
    f"SELECT {_KB_COLUMNS}, k.create_time, count(d.id), coalesce(sum(d.chunk_count), 0),"
    " k.owner"
    " FROM knowledge_bases k LEFT JOIN documents d ON d.kb_id = k.id {where}"
    " GROUP BY k.id ORDER BY k.name"
)
_DOC_COLUMNS = "d.document_id, d.text, d.metadata, d.chunk_count, d.create_time, d.update_time"
_LOAD_BATCH = 8192


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _filter_sql(wanted: Filter) -> tuple[str, list[Any]]:
    """SQL over ``d.metadata`` matching each key exactly; keys were validated (no ``"``)."""
    clauses: list[str] = ["1"]
    params: list[Any] = []
    for key, value in wanted.items():
        path = f'$."{key}"'
        if value is None:
            clauses.append("json_type(d.metadata, ?) = 'null'")
            params.append(path)
        elif isinstance(value, bool):
            clauses.append("json_type(d.metadata, ?) = ?")
            params += [path, "true" if value else "false"]
        else:
            kinds = "'integer', 'real'" if isinstance(value, int | float) else "'text'"
            clauses.append(
                f"json_type(d.metadata, ?) IN ({kinds}) AND json_extract(d.metadata, ?) = ?"
            )
            params += [path, path, value]
    return " AND ".join(clauses), params


def _kb(row: Sequence[Any]) -> KnowledgeBase:
    chunking = ChunkingOptions(row[3], row[4])
    return KnowledgeBase(
        row[1], row[2], chunking, row[5], row[6], datetime.fromisoformat(row[7]), *row[8:11]
    )


def _ref(row: Sequence[Any]) -> KnowledgeBaseRef:
    return KnowledgeBaseRef(row[0], row[1], ChunkingOptions(row[3], row[4]), row[5], row[6])


def _document(kb: KnowledgeBaseRef, row: Sequence[Any]) -> StoredDocument:
    created, updated = datetime.fromisoformat(row[4]), datetime.fromisoformat(row[5])
    return StoredDocument(row[0], kb.name, row[1], json.loads(row[2]), row[3], created, updated)


class SqliteKnowledgeStore(KnowledgeStore):
    """Knowledge bases in one SQLite file; no server.

    - Durability: a write that returned is committed to the WAL, which survives the
      process being killed; ``synchronous=FULL`` fsyncs each commit against OS crashes and
      power loss (`SqliteDatabase`).
    - Dense search is exact: a knowledge base's vectors are loaded from SQLite into a numpy
      matrix on its first dense search and then updated on every ingest and delete.
    - Lexical search is FTS5 ``bm25`` (porter stemming, diacritics folded), one FTS5 table
      per knowledge base; `Hit.score` is ``-bm25``.

    Open with `SqliteKnowledgeStore.open` (or `open_knowledge_store("sqlite:///path")`).

    Args:
        path: The database file (created with its parent directories).
        embedder: See `KnowledgeStore`.
        threads: SQLite worker threads.
        **options: `KnowledgeStore` options (tokenizer, limits, rrf_k).
    """

    backend = "sqlite"

    def __init__(self, path: str | Path, embedder: Embedder, *, threads: int = 4, **options: Any):
        super().__init__(embedder, **options)
        self.database = SqliteDatabase(path, threads=threads)
        self._indexes: dict[int, DenseIndex] = {}
        self._indexes_lock = threading.Lock()

    @classmethod
    async def open(
        cls, path: str | Path, embedder: Embedder, **options: Any
    ) -> SqliteKnowledgeStore:
        """Open (creating if needed) the store at `path`.

        Raises:
            RuntimeError: This Python's sqlite3 lacks FTS5.
        """
        store = cls(path, embedder, **options)
        try:
            await store.database.run(store._init_schema)
        except BaseException:
            await store.close()
            raise
        return store

    async def close(self) -> None:
        await self.database.close()

    def _init_schema(self) -> None:
        if not fts5_available():
            raise RuntimeError("this Python's sqlite3 lacks FTS5; use one built with it")
        with self.database.transaction() as db:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    db.execute(statement)
            columns = {row[1] for row in db.execute("PRAGMA table_info(knowledge_bases)")}
            if "owner" not in columns:  # a file from before owners were recorded
                db.execute("ALTER TABLE knowledge_bases ADD COLUMN owner TEXT NOT NULL DEFAULT ''")
            columns = {row[1] for row in db.execute("PRAGMA table_info(documents)")}
            if "owner" not in columns:  # a file from before documents had owners
                db.execute("ALTER TABLE documents ADD COLUMN owner TEXT NOT NULL DEFAULT ''")
            db.execute("CREATE INDEX IF NOT EXISTS documents_by_owner ON documents (owner, kb_id)")

    def _sql(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return self.database.connection().execute(sql, params).fetchall()

    def _index(self, kb: KnowledgeBaseRef) -> DenseIndex:
        with self._indexes_lock:
            index = self._indexes.get(kb.key)
            if index is None:
                index = self._indexes[kb.key] = DenseIndex(kb.dimension)
            return index

    # -- knowledge bases --------------------------------------------------------------------

    async def _create_knowledge_base(
        self,
        name: str,
        description: str,
        chunking: ChunkingOptions,
        embedder: str,
        dimension: int,
        owner: str,
    ) -> KnowledgeBase:
        row = (name, description, chunking.max_tokens, chunking.overlap_tokens, embedder)

        def create() -> KnowledgeBase:
            now = _now()
            with self.database.transaction() as db:
                try:
                    key = db.execute(
                        "INSERT INTO knowledge_bases (name, description, max_tokens,"
                        " overlap_tokens, embedder, dimension, create_time, owner)"
                        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        (*row, dimension, now, owner),
                    ).lastrowid
                except sqlite3.IntegrityError:
                    raise knowledge_base_exists(name) from None
                db.execute(_FTS.format(key=int(key or 0)))
            return _kb((key, *row, dimension, now, 0, 0, owner))

        return await self.database.run(create)

    async def _get_knowledge_base(self, name: str) -> KnowledgeBase | None:
        rows = await self.database.run(
            self._sql, _KB_READ.format(where="WHERE k.name = ?"), (name,)
        )
        return _kb(rows[0]) if rows else None

    async def _list_knowledge_bases(self) -> list[KnowledgeBase]:
        return [_kb(row) for row in await self.database.run(self._sql, _KB_READ.format(where=""))]

    async def _refs(self, names: Sequence[str]) -> dict[str, KnowledgeBaseRef]:
        marks = ",".join("?" * len(names))
        sql = f"SELECT {_KB_COLUMNS} FROM knowledge_bases k WHERE k.name IN ({marks})"
        return {row[1]: _ref(row) for row in await self.database.run(self._sql, sql, names)}

    async def _delete_knowledge_base(self, name: str) -> bool:
        kb = (await self._refs([name])).get(name)
        if kb is None:
            return False

        def delete() -> bool:
            # NOTE(retrieval): lock order everywhere: index lock, then the write lock.
            with self._index(kb).lock, self.database.transaction() as db:
                db.execute(f"DROP TABLE IF EXISTS fts_{kb.key}")
                db.execute("DELETE FROM chunks WHERE kb_id = ?", (kb.key,))
                db.execute("DELETE FROM documents WHERE kb_id = ?", (kb.key,))
                deleted = db.execute("DELETE FROM knowledge_bases WHERE id = ?", (kb.key,))
                with self._indexes_lock:
                    self._indexes.pop(kb.key, None)
                return deleted.rowcount > 0

        return await self.database.run(delete)

    # -- documents --------------------------------------------------------------------------

    async def _existing(
        self, kb: KnowledgeBaseRef, document_ids: list[str]
    ) -> dict[str, ExistingDocument]:
        marks = ",".join("?" * len(document_ids))
        rows = await self.database.run(
            self._sql,
            "SELECT document_id, content_hash, metadata, chunk_count FROM documents"
            f" WHERE kb_id = ? AND document_id IN ({marks})",
            [kb.key, *document_ids],
        )
        return {r[0]: ExistingDocument(r[1], json.loads(r[2]), r[3]) for r in rows}

    async def _write(self, kb: KnowledgeBaseRef, writes: list[DocumentWrite]) -> None:
        def write() -> None:
            index = self._index(kb)
            removed: list[int] = []
            added: list[tuple[Any, int, Any]] = []
            now = _now()
            # NOTE(retrieval): a lazy index load also holds the index lock, so it sees all or
            # none of this commit; after the commit the loaded index is brought up to date.
            with index.lock:
                with self.database.transaction() as db:
                    for w in writes:
                        self._write_one(db, kb, w, now, removed, added)
                if index.loaded:
                    index.remove_documents(np.array(removed, dtype=np.int64))
                    for ids, doc_key, vectors in added:
                        index.add(ids, np.full(len(ids), doc_key, dtype=np.int64), vectors)

        await self.database.run(write)

    def _write_one(
        self,
        db: sqlite3.Connection,
        kb: KnowledgeBaseRef,
        w: DocumentWrite,
        now: str,
        removed: list[int],
        added: list[tuple[Any, int, Any]],
    ) -> None:
        metadata = dump_metadata(w.metadata)
        if w.chunks is None or w.vectors is None:
            db.execute(
                "UPDATE documents SET metadata = ?, update_time = ?"
                " WHERE kb_id = ? AND document_id = ?",
                (metadata, now, kb.key, w.document_id),
            )
            return
        found = db.execute(
            "SELECT id FROM documents WHERE kb_id = ? AND document_id = ?", (kb.key, w.document_id)
        ).fetchone()
        values = (w.text, metadata, w.content_hash, len(w.chunks), now, w.owner)
        if found is not None:
            doc_key = int(found[0])
            self._delete_chunks(db, kb.key, doc_key)
            removed.append(doc_key)
            db.execute(
                "UPDATE documents SET text = ?, metadata = ?, content_hash = ?, chunk_count = ?,"
                " update_time = ?, owner = ? WHERE id = ?",
                (*values, doc_key),
            )
        else:
            doc_key = int(
                db.execute(
                    "INSERT INTO documents (text, metadata, content_hash, chunk_count, update_time,"
                    " owner, kb_id, document_id, create_time) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (*values, kb.key, w.document_id, now),
                ).lastrowid
                or 0
            )
        vectors = np.ascontiguousarray(w.vectors, dtype=np.float32)
        db.executemany(
            "INSERT INTO chunks (kb_id, doc_key, chunk_index, start_char, end_char, text,"
            " embedding) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (kb.key, doc_key, c.index, c.start, c.end, c.text, vectors[i].tobytes())
                for i, c in enumerate(w.chunks)
            ],
        )
        db.execute(
            f"INSERT INTO fts_{kb.key} (rowid, text) SELECT id, text FROM chunks WHERE doc_key = ?",
            (doc_key,),
        )
        ids = db.execute(
            "SELECT id FROM chunks WHERE doc_key = ? ORDER BY chunk_index", (doc_key,)
        ).fetchall()
        added.append((np.array([r[0] for r in ids], dtype=np.int64), doc_key, vectors))

    @staticmethod
    def _delete_chunks(db: sqlite3.Connection, kb_key: int, doc_key: int) -> None:
        db.execute(
            f"INSERT INTO fts_{kb_key} (fts_{kb_key}, rowid, text)"
            " SELECT 'delete', id, text FROM chunks WHERE doc_key = ?",
            (doc_key,),
        )
        db.execute("DELETE FROM chunks WHERE doc_key = ?", (doc_key,))

    async def _get_document(self, kb: KnowledgeBaseRef, document_id: str) -> StoredDocument | None:
        rows = await self.database.run(
            self._sql,
            f"SELECT {_DOC_COLUMNS} FROM documents d WHERE d.kb_id = ? AND d.document_id = ?",
            (kb.key, document_id),
        )
        return _document(kb, rows[0]) if rows else None

    async def _list_documents(
        self, kb: KnowledgeBaseRef, metadata_filter: Filter, limit: int, after: str | None
    ) -> list[StoredDocument]:
        where, params = _filter_sql(metadata_filter)
        rows = await self.database.run(
            self._sql,
            f"SELECT {_DOC_COLUMNS} FROM documents d WHERE d.kb_id = ? AND {where}"
            " AND (? IS NULL OR d.document_id > ?) ORDER BY d.document_id LIMIT ?",
            [kb.key, *params, after, after, limit],
        )
        return [_document(kb, row) for row in rows]

    async def _owned(
        self, owner: str, limit: int, after: tuple[str, str] | None
    ) -> list[tuple[str, str]]:
        rows = await self.database.run(
            self._sql,
            "SELECT k.name, d.document_id FROM documents d JOIN knowledge_bases k"
            " ON k.id = d.kb_id WHERE d.owner = ?"
            " AND (? IS NULL OR (k.name, d.document_id) > (?, ?))"
            " ORDER BY k.name, d.document_id LIMIT ?",
            [owner, after and after[0], *(after or (None, None)), limit],
        )
        return [(name, doc) for name, doc in rows]

    async def _stale(self, before: datetime, limit: int) -> list[tuple[str, str]]:
        rows = await self.database.run(
            self._sql,
            "SELECT k.name, d.document_id FROM documents d JOIN knowledge_bases k"
            " ON k.id = d.kb_id WHERE d.update_time < ? ORDER BY d.update_time LIMIT ?",
            [before.astimezone(UTC).isoformat(), limit],
        )
        return [(name, doc) for name, doc in rows]

    async def _delete_document(self, kb: KnowledgeBaseRef, document_id: str) -> bool:
        def delete() -> bool:
            index = self._index(kb)
            with index.lock:
                with self.database.transaction() as db:
                    found = db.execute(
                        "SELECT id FROM documents WHERE kb_id = ? AND document_id = ?",
                        (kb.key, document_id),
                    ).fetchone()
                    if found is None:
                        return False
                    self._delete_chunks(db, kb.key, found[0])
                    db.execute("DELETE FROM documents WHERE id = ?", (found[0],))
                if index.loaded:
                    index.remove_documents(np.array([found[0]], dtype=np.int64))
            return True

        return await self.database.run(delete)

    # -- search -----------------------------------------------------------------------------

    def _loaded_index(self, kb: KnowledgeBaseRef) -> DenseIndex:
        index = self._index(kb)
        with index.lock:
            if not index.loaded:
                cursor = self.database.connection().execute(
                    "SELECT id, doc_key, embedding FROM chunks WHERE kb_id = ? ORDER BY id",
                    (kb.key,),
                )
                while rows := cursor.fetchmany(_LOAD_BATCH):
                    ids = np.array([r[0] for r in rows], dtype=np.int64)
                    docs = np.array([r[1] for r in rows], dtype=np.int64)
                    vectors = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32)
                    index.add(ids, docs, vectors.reshape(len(rows), kb.dimension))
                index.loaded = True
        return index

    async def _dense(
        self, kb: KnowledgeBaseRef, vector: Any, depth: int, metadata_filter: Filter
    ) -> list[tuple[int, float]]:
        def search() -> list[tuple[int, float]]:
            index = self._loaded_index(kb)
            if not metadata_filter:
                return index.search(vector, depth)
            where, params = _filter_sql(metadata_filter)
            sql = f"SELECT d.id FROM documents d WHERE d.kb_id = ? AND {where}"
            allowed = np.array([r[0] for r in self._sql(sql, [kb.key, *params])], dtype=np.int64)
            return index.search(vector, depth, lambda docs: np.isin(docs, allowed))

        return await self.database.run(search)

    async def _lexical(
        self, kb: KnowledgeBaseRef, terms: list[str], depth: int, metadata_filter: Filter
    ) -> list[tuple[int, float]]:
        fts = f"fts_{kb.key}"
        where, params = _filter_sql(metadata_filter)
        join = (
            f" JOIN chunks c ON c.id = {fts}.rowid JOIN documents d ON d.id = c.doc_key"
            if metadata_filter
            else ""
        )
        rows = await self.database.run(
            self._sql,
            f"SELECT {fts}.rowid, bm25({fts}) AS s FROM {fts}{join}"
            f" WHERE {fts} MATCH ? AND {where} ORDER BY s, {fts}.rowid LIMIT ?",
            # terms are letters and digits only; quoted, each is a plain FTS5 string
            [" OR ".join(f'"{term}"' for term in terms), *params, depth],
        )
        return [(int(r[0]), -float(r[1])) for r in rows]

    async def _fetch(self, kb: KnowledgeBaseRef, keys: list[int]) -> dict[int, ChunkRow]:
        marks = ",".join("?" * len(keys))
        rows = await self.database.run(
            self._sql,
            "SELECT c.id, d.document_id, c.chunk_index, c.text, c.start_char, c.end_char,"
            " d.metadata FROM chunks c JOIN documents d ON d.id = c.doc_key"
            f" WHERE c.id IN ({marks})",
            keys,
        )
        return {r[0]: ChunkRow(r[1], r[2], r[3], r[4], r[5], json.loads(r[6])) for r in rows}
