"""Opening a knowledge store from a URL."""

from __future__ import annotations

from typing import Any

from ._embedder import Embedder
from ._minilm import default_embedder
from ._store import KnowledgeStore


async def open_knowledge_store(
    url: str, embedder: Embedder | None = None, **options: Any
) -> KnowledgeStore:
    """The store `url` names, opened (schema created if needed).

    - ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db``: the embedded
      `SqliteKnowledgeStore`.
    - ``postgresql://user@host:port/db`` (or ``postgres://``): `PostgresKnowledgeStore`
      (pgvector + full-text search); pass ``namespace="..."`` to use another schema than
      ``retrieval`` (a memory service sharing the database uses its own).

    Args:
        url: Where the store lives.
        embedder: Default: the process-wide `default_embedder` (all-MiniLM-L6-v2 int8).
        **options: Backend and `KnowledgeStore` options (limits, rrf_k, tokenizer, ...).

    Raises:
        ValueError: An unsupported URL.
    """
    embedder = embedder or default_embedder()
    if url.startswith("sqlite:///"):
        from ._sqlite import SqliteKnowledgeStore

        return await SqliteKnowledgeStore.open(url.removeprefix("sqlite:///"), embedder, **options)
    if url.startswith(("postgresql://", "postgres://")):
        from ._postgres import PostgresKnowledgeStore

        return await PostgresKnowledgeStore.open(url, embedder, **options)
    scheme = url.partition(":")[0]  # never echo the rest: it may hold a password
    raise ValueError(
        f"unsupported store URL scheme {scheme!r}: use sqlite:///path/to/file.db "
        "or postgresql://user@host:port/database"
    )
