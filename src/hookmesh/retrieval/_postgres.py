"""The scale-out store: PostgreSQL with pgvector (HNSW, cosine) and full-text search."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from contextvars import ContextVar
from datetime import datetime
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
from ._embedder import Embedder
from ._limits import knowledge_base_exists
from ._store import KnowledgeStore
from ._types import ChunkingOptions, KnowledgeBase, StoredDocument

_NAMESPACE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
# NOTE(retrieval): one lock id for every hookmesh schema migration, so concurrent replicas
# starting together do not race on CREATE ... IF NOT EXISTS.
_MIGRATION_LOCK = 0x686D7274  # "hmrt"

_SCHEMA = """
CREATE SCHEMA IF NOT EXISTS {ns};
CREATE TABLE IF NOT EXISTS {ns}.knowledge_bases (
    id             bigserial PRIMARY KEY,
    name           text NOT NULL UNIQUE,
    description    text NOT NULL,
    max_tokens     integer NOT NULL,
    overlap_tokens integer NOT NULL,
    embedder       text NOT NULL,
    dimension      integer NOT NULL,
    create_time    timestamptz NOT NULL DEFAULT now(),
    owner          text NOT NULL DEFAULT ''
);
ALTER TABLE {ns}.knowledge_bases ADD COLUMN IF NOT EXISTS owner text NOT NULL DEFAULT '';
CREATE TABLE IF NOT EXISTS {ns}.documents (
    id           bigserial PRIMARY KEY,
    kb_id        bigint NOT NULL REFERENCES {ns}.knowledge_bases (id) ON DELETE CASCADE,
    document_id  text NOT NULL,
    text         text NOT NULL,
    metadata     jsonb NOT NULL,
    content_hash text NOT NULL,
    chunk_count  integer NOT NULL,
    create_time  timestamptz NOT NULL DEFAULT now(),
    update_time  timestamptz NOT NULL DEFAULT now(),
    owner        text NOT NULL DEFAULT '',
    UNIQUE (kb_id, document_id)
);
ALTER TABLE {ns}.documents ADD COLUMN IF NOT EXISTS owner text NOT NULL DEFAULT '';
CREATE INDEX IF NOT EXISTS documents_by_owner ON {ns}.documents (owner, kb_id);
CREATE INDEX IF NOT EXISTS documents_metadata ON {ns}.documents USING gin (metadata jsonb_path_ops);
CREATE TABLE IF NOT EXISTS {ns}.chunks (
    id          bigserial PRIMARY KEY,
    kb_id       bigint NOT NULL,
    doc_key     bigint NOT NULL REFERENCES {ns}.documents (id) ON DELETE CASCADE,
    chunk_index integer NOT NULL,
    start_char  integer NOT NULL,
    end_char    integer NOT NULL,
    text        text NOT NULL,
    embedding   vector({dimension}) NOT NULL,
    tsv         tsvector GENERATED ALWAYS AS (to_tsvector('english'::regconfig, text)) STORED
);
CREATE INDEX IF NOT EXISTS chunks_by_doc ON {ns}.chunks (doc_key);
CREATE INDEX IF NOT EXISTS chunks_by_kb ON {ns}.chunks (kb_id);
CREATE INDEX IF NOT EXISTS chunks_tsv ON {ns}.chunks USING gin (tsv);
CREATE INDEX IF NOT EXISTS chunks_embedding ON {ns}.chunks USING hnsw (embedding vector_cosine_ops);
"""


def _kb(row: Sequence[Any]) -> KnowledgeBase:
    return KnowledgeBase(
        name=row[1],
        description=row[2],
        chunking=ChunkingOptions(row[3], row[4]),
        embedder=row[5],
        dimension=row[6],
        create_time=row[7],
        owner=row[8],
        document_count=row[9] if len(row) > 9 else 0,
        chunk_count=row[10] if len(row) > 10 else 0,
    )


_SNAPSHOT: ContextVar[Any] = ContextVar("hookmesh_pg_snapshot", default=None)
"""The connection of the search running in this task, if any (see `_snapshot`)."""


class PostgresKnowledgeStore(KnowledgeStore):
    """Knowledge bases in PostgreSQL: pgvector HNSW (cosine) for dense search, a generated
    ``tsvector`` (``english``) with a GIN index and ``ts_rank`` for lexical search.

    Tables live in their own schema (`namespace`), so several services (retrieval, memory)
    or tests can share one database. The vector column's dimension is fixed by the first
    embedder that creates the schema. Dense search runs pgvector's iterative HNSW scan
    (``hnsw.iterative_scan = strict_order``) so filters by knowledge base and metadata
    still fill `top_k`; HNSW is approximate, so results may differ slightly from the exact
    SQLite store on large bases. Commits follow the server's durability settings.

    The driver is psycopg 3 (async, binary wheels with libpq, COPY support) with its pool
    and the pgvector adapters; the server needs pgvector 0.8 or later (iterative index
    scans) installed, and the ``vector`` extension created or a role that may create it.

    Args:
        url: A libpq URL, ``postgresql://user:password@host:port/database``.
        embedder: See `KnowledgeStore`.
        namespace: The PostgreSQL schema for the tables.
        min_connections: Pool floor.
        max_connections: Pool ceiling.
        connect_timeout: Seconds to wait for the first connection.
        ef_search: HNSW candidate list size (recall versus speed).
        **options: `KnowledgeStore` options (tokenizer, limits, rrf_k).
    """

    backend = "postgresql"

    def __init__(
        self,
        url: str,
        embedder: Embedder,
        *,
        namespace: str = "retrieval",
        min_connections: int = 1,
        max_connections: int = 4,
        connect_timeout: float = 10.0,
        ef_search: int = 100,
        **options: Any,
    ) -> None:
        super().__init__(embedder, **options)
        if not _NAMESPACE.fullmatch(namespace):
            raise ValueError("namespace is 1-63 characters of a-z, 0-9 and '_'")
        self.namespace = namespace
        self._url = url
        self._min, self._max = min_connections, max_connections
        self._connect_timeout = connect_timeout
        self._ef_search = int(ef_search)
        self._pool: Any = None

    @classmethod
    async def open(cls, url: str, embedder: Embedder, **options: Any) -> PostgresKnowledgeStore:
        """Connect, create the schema if needed, and open the pool.

        Raises:
            RuntimeError: The schema exists with another vector dimension.
            psycopg.OperationalError: The server cannot be reached.
        """
        store = cls(url, embedder, **options)
        try:
            await store._migrate()
            await store._open_pool()
        except BaseException:
            await store.close()
            raise
        return store

    async def close(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()

    # -- plumbing ---------------------------------------------------------------------------

    async def _migrate(self) -> None:
        import psycopg

        ns, dim = self.namespace, self.embedder.dimension
        async with await psycopg.AsyncConnection.connect(
            self._url, autocommit=True, connect_timeout=max(1, int(self._connect_timeout))
        ) as conn:
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
                await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                for statement in _SCHEMA.format(ns=ns, dimension=dim).split(";"):
                    if statement.strip():
                        await conn.execute(statement)  # type: ignore[arg-type]
            cursor = await conn.execute(
                "SELECT atttypmod FROM pg_attribute WHERE attrelid = %s::regclass"
                " AND attname = 'embedding'",
                (f"{ns}.chunks",),
            )
            row = await cursor.fetchone()
            if row is None or row[0] != dim:
                raise RuntimeError(
                    f"schema {ns!r} stores {row[0] if row else '?'}-dimensional vectors; this "
                    f"embedder makes {dim}: use another namespace"
                )

    async def _open_pool(self) -> None:
        from pgvector.psycopg import register_vector_async
        from psycopg_pool import AsyncConnectionPool

        ef_search = self._ef_search

        async def configure(conn: Any) -> None:
            await register_vector_async(conn)
            await conn.execute(f"SET hnsw.ef_search = {ef_search}")
            await conn.execute("SET hnsw.iterative_scan = strict_order")

        self._pool = AsyncConnectionPool(
            self._url,
            min_size=self._min,
            max_size=self._max,
            kwargs={"autocommit": True},
            configure=configure,
            open=False,
        )
        await self._pool.open(wait=True, timeout=self._connect_timeout)

    def _sql(self, text: str) -> Any:
        return text.replace("{ns}", self.namespace)

    async def _fetchall(
        self, sql: str, params: Sequence[Any] = (), *, prepare: bool | None = None
    ) -> list[Any]:
        if self._pool is None:
            raise RuntimeError("the knowledge store is closed")
        snapshot = _SNAPSHOT.get()
        if snapshot is not None:
            cursor = await snapshot.execute(self._sql(sql), params, prepare=prepare)
            return list(await cursor.fetchall())
        async with self._pool.connection() as conn:
            cursor = await conn.execute(self._sql(sql), params, prepare=prepare)
            return list(await cursor.fetchall())

    @asynccontextmanager
    async def _snapshot(self) -> AsyncIterator[None]:  # type: ignore[override]
        """A read-only REPEATABLE READ transaction on one connection for the whole search."""
        from psycopg import IsolationLevel

        if self._pool is None:
            raise RuntimeError("the knowledge store is closed")
        async with self._pool.connection() as conn:
            await conn.set_isolation_level(IsolationLevel.REPEATABLE_READ)
            await conn.set_read_only(True)
            try:
                async with conn.transaction():
                    token = _SNAPSHOT.set(conn)
                    try:
                        yield
                    finally:
                        _SNAPSHOT.reset(token)
            finally:
                await conn.set_read_only(False)
                await conn.set_isolation_level(None)

    async def analyze(self) -> None:
        """Refresh the planner's statistics on this store's tables.

        Autovacuum does this by itself within a minute or so of large changes; until then
        the planner may misjudge a freshly bulk-loaded base (e.g. sort every row instead
        of walking the HNSW index). Call after a bulk load that must be fast at once.
        """
        if self._pool is None:
            raise RuntimeError("the knowledge store is closed")
        async with self._pool.connection() as conn:
            for table in ("knowledge_bases", "documents", "chunks"):
                await conn.execute(f"ANALYZE {self.namespace}.{table}")  # type: ignore[arg-type]

    # -- knowledge bases --------------------------------------------------------------------

    _KB_COLUMNS = (
        "k.id, k.name, k.description, k.max_tokens, k.overlap_tokens, k.embedder, k.dimension,"
        " k.create_time, k.owner"
    )
    _KB_COUNTS = (
        ", (SELECT count(*) FROM {ns}.documents d WHERE d.kb_id = k.id),"
        " (SELECT coalesce(sum(chunk_count), 0) FROM {ns}.documents d WHERE d.kb_id = k.id)"
    )

    async def _create_knowledge_base(
        self,
        name: str,
        description: str,
        chunking: ChunkingOptions,
        embedder: str,
        dimension: int,
        owner: str,
    ) -> KnowledgeBase:
        rows = await self._fetchall(
            "INSERT INTO {ns}.knowledge_bases AS k (name, description, max_tokens, overlap_tokens,"
            " embedder, dimension, owner) VALUES (%s, %s, %s, %s, %s, %s, %s)"
            f" ON CONFLICT (name) DO NOTHING RETURNING {self._KB_COLUMNS}",
            (
                name,
                description,
                chunking.max_tokens,
                chunking.overlap_tokens,
                embedder,
                dimension,
                owner,
            ),
        )
        if not rows:
            raise knowledge_base_exists(name)
        return _kb(rows[0])

    async def _get_knowledge_base(self, name: str) -> KnowledgeBase | None:
        rows = await self._fetchall(
            f"SELECT {self._KB_COLUMNS}{self._KB_COUNTS} FROM {{ns}}.knowledge_bases k"
            " WHERE k.name = %s",
            (name,),
        )
        return _kb(rows[0]) if rows else None

    async def _list_knowledge_bases(self) -> list[KnowledgeBase]:
        rows = await self._fetchall(
            f"SELECT {self._KB_COLUMNS}{self._KB_COUNTS} FROM {{ns}}.knowledge_bases k"
            " ORDER BY k.name"
        )
        return [_kb(row) for row in rows]

    async def _delete_knowledge_base(self, name: str) -> bool:
        rows = await self._fetchall(
            "DELETE FROM {ns}.knowledge_bases WHERE name = %s RETURNING id", (name,)
        )
        return bool(rows)

    async def _refs(self, names: Sequence[str]) -> dict[str, KnowledgeBaseRef]:
        rows = await self._fetchall(
            f"SELECT {self._KB_COLUMNS} FROM {{ns}}.knowledge_bases k WHERE k.name = ANY(%s)",
            (list(names),),
        )
        return {
            r[1]: KnowledgeBaseRef(r[0], r[1], ChunkingOptions(r[3], r[4]), r[5], r[6])
            for r in rows
        }

    # -- documents --------------------------------------------------------------------------

    async def _existing(
        self, kb: KnowledgeBaseRef, document_ids: list[str]
    ) -> dict[str, ExistingDocument]:
        if not document_ids:
            return {}
        rows = await self._fetchall(
            "SELECT document_id, content_hash, metadata, chunk_count FROM {ns}.documents"
            " WHERE kb_id = %s AND document_id = ANY(%s)",
            (kb.key, document_ids),
        )
        return {r[0]: ExistingDocument(r[1], r[2], r[3]) for r in rows}

    async def _write(self, kb: KnowledgeBaseRef, writes: list[DocumentWrite]) -> None:
        from psycopg.types.json import Jsonb

        if self._pool is None:
            raise RuntimeError("the knowledge store is closed")
        async with self._pool.connection() as conn, conn.transaction():
            copy_rows: list[tuple[Any, ...]] = []
            for w in writes:
                metadata = Jsonb(w.metadata, dumps=dump_metadata)
                if w.chunks is None:
                    await conn.execute(
                        self._sql(
                            "UPDATE {ns}.documents SET metadata = %s, update_time = now()"
                            " WHERE kb_id = %s AND document_id = %s"
                        ),
                        (metadata, kb.key, w.document_id),
                    )
                    continue
                assert w.vectors is not None
                cursor = await conn.execute(
                    self._sql(
                        "INSERT INTO {ns}.documents (kb_id, document_id, text, metadata,"
                        " content_hash, chunk_count, owner) VALUES (%s, %s, %s, %s, %s, %s, %s)"
                        " ON CONFLICT (kb_id, document_id) DO UPDATE SET text = excluded.text,"
                        " metadata = excluded.metadata, content_hash = excluded.content_hash,"
                        " chunk_count = excluded.chunk_count, owner = excluded.owner,"
                        " update_time = now() RETURNING id"
                    ),
                    (
                        kb.key,
                        w.document_id,
                        w.text,
                        metadata,
                        w.content_hash,
                        len(w.chunks),
                        w.owner,
                    ),
                )
                row = await cursor.fetchone()
                assert row is not None
                doc_key = row[0]
                await conn.execute(
                    self._sql("DELETE FROM {ns}.chunks WHERE doc_key = %s"), (doc_key,)
                )
                vectors = np.asarray(w.vectors, dtype=np.float32)
                copy_rows.extend(
                    (kb.key, doc_key, c.index, c.start, c.end, c.text, vectors[i])
                    for i, c in enumerate(w.chunks)
                )
            if copy_rows:
                sql = self._sql(
                    "COPY {ns}.chunks (kb_id, doc_key, chunk_index, start_char, end_char,"
                    " text, embedding) FROM STDIN WITH (FORMAT BINARY)"
                )
                async with conn.cursor() as cursor, cursor.copy(sql) as copy:
                    copy.set_types(["int8", "int8", "int4", "int4", "int4", "text", "vector"])
                    for copy_row in copy_rows:
                        await copy.write_row(copy_row)

    @staticmethod
    def _document(kb: KnowledgeBaseRef, row: Sequence[Any]) -> StoredDocument:
        return StoredDocument(
            id=row[0],
            knowledge_base=kb.name,
            text=row[1],
            metadata=row[2],
            chunk_count=row[3],
            create_time=row[4],
            update_time=row[5],
        )

    async def _get_document(self, kb: KnowledgeBaseRef, document_id: str) -> StoredDocument | None:
        rows = await self._fetchall(
            "SELECT document_id, text, metadata, chunk_count, create_time, update_time"
            " FROM {ns}.documents WHERE kb_id = %s AND document_id = %s",
            (kb.key, document_id),
        )
        return self._document(kb, rows[0]) if rows else None

    async def _list_documents(
        self, kb: KnowledgeBaseRef, metadata_filter: Filter, limit: int, after: str | None
    ) -> list[StoredDocument]:
        from psycopg.types.json import Jsonb

        rows = await self._fetchall(
            "SELECT d.document_id, d.text, d.metadata, d.chunk_count, d.create_time,"
            " d.update_time FROM {ns}.documents d WHERE d.kb_id = %s AND d.metadata @> %s"
            ' AND (%s::text IS NULL OR d.document_id > %s COLLATE "C")'
            ' ORDER BY d.document_id COLLATE "C"'
            " LIMIT %s",
            (kb.key, Jsonb(metadata_filter), after, after, limit),
        )
        return [self._document(kb, row) for row in rows]

    async def _owned(
        self, owner: str, limit: int, after: tuple[str, str] | None
    ) -> list[tuple[str, str]]:
        rows = await self._fetchall(
            "SELECT k.name, d.document_id FROM {ns}.documents d JOIN {ns}.knowledge_bases k"
            " ON k.id = d.kb_id WHERE d.owner = %s AND (%s::text IS NULL"
            ' OR (k.name COLLATE "C", d.document_id COLLATE "C") > (%s, %s))'
            ' ORDER BY k.name COLLATE "C", d.document_id COLLATE "C" LIMIT %s',
            (owner, after and after[0], *(after or (None, None)), limit),
        )
        return [(name, doc) for name, doc in rows]

    async def _stale(self, before: datetime, limit: int) -> list[tuple[str, str]]:
        rows = await self._fetchall(
            "SELECT k.name, d.document_id FROM {ns}.documents d JOIN {ns}.knowledge_bases k"
            " ON k.id = d.kb_id WHERE d.update_time < %s ORDER BY d.update_time LIMIT %s",
            (before, limit),
        )
        return [(name, doc) for name, doc in rows]

    async def _delete_document(self, kb: KnowledgeBaseRef, document_id: str) -> bool:
        rows = await self._fetchall(
            "DELETE FROM {ns}.documents WHERE kb_id = %s AND document_id = %s RETURNING id",
            (kb.key, document_id),
        )
        return bool(rows)

    # -- search -----------------------------------------------------------------------------

    @staticmethod
    def _filter(metadata_filter: Filter) -> tuple[str, str, list[Any]]:
        from psycopg.types.json import Jsonb

        if not metadata_filter:
            return "", "", []
        return (
            " JOIN {ns}.documents d ON d.id = c.doc_key",
            " AND d.metadata @> %s",
            [Jsonb(metadata_filter)],
        )

    async def _dense(
        self,
        kb: KnowledgeBaseRef,
        vector: np.ndarray[Any, Any],
        depth: int,
        metadata_filter: Filter,
    ) -> list[tuple[int, float]]:
        join, where, params = self._filter(metadata_filter)
        query = np.asarray(vector, dtype=np.float32)
        rows = await self._fetchall(
            f"SELECT c.id, 1 - (c.embedding <=> %s) FROM {{ns}}.chunks c{join}"
            f" WHERE c.kb_id = %s{where} ORDER BY c.embedding <=> %s, c.id LIMIT %s",
            (query, kb.key, *params, query, depth),
            prepare=False,  # a custom plan per call: the planner sees this base's size
        )
        return [(int(r[0]), float(r[1])) for r in rows]

    async def _lexical(
        self, kb: KnowledgeBaseRef, terms: list[str], depth: int, metadata_filter: Filter
    ) -> list[tuple[int, float]]:
        join, where, params = self._filter(metadata_filter)
        # terms are letters and digits only, so joining them cannot inject tsquery syntax
        rows = await self._fetchall(
            # NOTE(retrieval): ts_rank, not ts_rank_cd: PostgreSQL ranks every matching row,
            # and with OR queries over common words that is a third of a base; ts_rank
            # halves that cost (measured) and proximity matters little for RRF input.
            f"SELECT c.id, ts_rank(c.tsv, q) AS s FROM {{ns}}.chunks c{join},"
            " to_tsquery('english'::regconfig, %s) q"
            f" WHERE c.kb_id = %s AND c.tsv @@ q{where} ORDER BY s DESC, c.id LIMIT %s",
            (" | ".join(terms), kb.key, *params, depth),
            prepare=False,
        )
        return [(int(r[0]), float(r[1])) for r in rows]

    async def _fetch(self, kb: KnowledgeBaseRef, keys: list[int]) -> dict[int, ChunkRow]:
        rows = await self._fetchall(
            "SELECT c.id, d.document_id, c.chunk_index, c.text, c.start_char, c.end_char,"
            " d.metadata FROM {ns}.chunks c JOIN {ns}.documents d ON d.id = c.doc_key"
            " WHERE c.id = ANY(%s)",
            (keys,),
        )
        return {r[0]: ChunkRow(r[1], r[2], r[3], r[4], r[5], r[6]) for r in rows}
