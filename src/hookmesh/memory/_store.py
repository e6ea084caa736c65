"""`MemoryStore`: long-term memories as documents of a knowledge store, one base per user."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from types import TracebackType
from typing import Any

from hookmesh.models import ChatModel
from hookmesh.retrieval import Embedder, KnowledgeStore, default_embedder, open_knowledge_store

from ._bases import LOCK_STRIPES
from ._embedcache import CachingEmbedder
from ._extract import DEFAULT_EXTRACTION_INSTRUCTION
from ._types import MemoryLimits
from ._writes import MemoryWrites

DEFAULT_DEDUP_THRESHOLD = 0.95
"""Cosine similarity at or above which a new fact is merged into an existing memory."""

_MAX_METADATA_KEYS = 24  # the knowledge store's 32, less the layout's own 8


class MemoryStore(MemoryWrites):
    """Long-term memories of many users, searched by meaning and keywords fused by rank.

    Built on the retrieval library, not beside it: each memory is one document of a
    `KnowledgeStore` (SQLite + FTS5 + exact vectors, or PostgreSQL + pgvector), and each user
    has a knowledge base of their own (named after a hash of the user id). So a user is a
    storage boundary, not only a filter: a search reads only that user's index, and
    `delete_all` of a user drops one base. Agent and session are document metadata, matched
    exactly when a read names them. Bookkeeping (times, sources, origin) lives in the
    metadata too, so search hits carry whole records.

    Adds are serialised per user (striped locks) so the near-duplicate check and the write
    of one fact are atomic within this process; a fact whose vector has cosine similarity
    at or above `dedup_threshold` with a memory of the same user and agent is merged into
    it (sources, caller metadata and update time) rather than stored again. Each fact is
    embedded once per add (`CachingEmbedder`).

    Errors are `HookmeshError`s: ``INVALID_ARGUMENT`` (`SchemaError`, reason
    ``INVALID_SCHEMA``, field paths as in memory.proto) and ``NOT_FOUND``
    (``MEMORY_NOT_FOUND``, also for another user's memory). Open with `open_memory_store`.

    Args:
        knowledge: The knowledge store to keep memories in (closed with this store).
        model: Chat model extracting facts from messages; None stores user turns verbatim.
        dedup_threshold: Merge threshold (0 < t <= 1; above 1 never merges).
        limits: Request bounds.
        extraction_instruction: The extraction model's system instruction.
        extraction_timeout: Seconds one extraction may take before falling back.
    """

    def __init__(
        self,
        knowledge: KnowledgeStore,
        *,
        model: ChatModel | None = None,
        dedup_threshold: float = DEFAULT_DEDUP_THRESHOLD,
        limits: MemoryLimits | None = None,
        extraction_instruction: str = DEFAULT_EXTRACTION_INSTRUCTION,
        extraction_timeout: float = 60.0,
    ) -> None:
        if dedup_threshold <= 0:
            raise ValueError("dedup_threshold must be positive (above 1 disables merging)")
        if extraction_timeout <= 0:
            raise ValueError("extraction_timeout must be positive")
        self.knowledge = knowledge
        self.model = model
        self.dedup_threshold = dedup_threshold
        self.limits = limits or MemoryLimits()
        if self.limits.max_metadata_keys > _MAX_METADATA_KEYS:
            raise ValueError(f"limits.max_metadata_keys is at most {_MAX_METADATA_KEYS}")
        self.extraction_instruction = extraction_instruction
        self.extraction_timeout = extraction_timeout
        self._locks = [asyncio.Lock() for _ in range(LOCK_STRIPES)]
        self._bases: set[str] = set()

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        embedder: Embedder | None = None,
        namespace: str = "memory",
        knowledge_options: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> MemoryStore:
        """Open (creating if needed) the memory store at `url`.

        Args:
            url: ``sqlite:///path.db`` or ``postgresql://user@host:port/db``.
            embedder: Default: the process-wide `default_embedder`.
            namespace: PostgreSQL schema of the tables (ignored for SQLite).
            knowledge_options: More `open_knowledge_store` options (pool sizes...).
            **options: `MemoryStore` options (model, dedup_threshold, limits...).
        """
        extra = dict(knowledge_options or {})
        if url.startswith(("postgresql://", "postgres://")):
            extra.setdefault("namespace", namespace)
        cached = CachingEmbedder(embedder or default_embedder())
        knowledge = await open_knowledge_store(url, cached, **extra)  # type: ignore[arg-type]
        try:
            return cls(knowledge, **options)
        except BaseException:
            await knowledge.close()
            raise

    @property
    def backend(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return self.knowledge.backend

    async def close(self) -> None:
        """Close the knowledge store (waits for running commits)."""
        await self.knowledge.close()

    async def __aenter__(self) -> MemoryStore:
        return self

    async def __aexit__(
        self,
        unused_type: type[BaseException] | None,
        unused_value: BaseException | None,
        unused_tb: TracebackType | None,
    ) -> None:
        await self.close()


async def open_memory_store(
    url: str,
    *,
    embedder: Embedder | None = None,
    model: ChatModel | None = None,
    namespace: str = "memory",
    dedup_threshold: float = DEFAULT_DEDUP_THRESHOLD,
    limits: MemoryLimits | None = None,
    **options: Any,
) -> MemoryStore:
    """The memory store `url` names, opened (schema created if needed).

    Args:
        url: ``sqlite:///relative.db``, ``sqlite:////absolute.db`` or
            ``postgresql://user:password@host:port/database`` (may hold a secret).
        embedder: Default: the process-wide all-MiniLM-L6-v2 (`default_embedder`).
        model: Extraction model; None stores user turns verbatim.
        namespace: PostgreSQL schema of the tables (ignored for SQLite).
        dedup_threshold: Cosine similarity at or above which facts merge.
        limits: Request bounds.
        **options: More `MemoryStore` options (extraction_instruction, extraction_timeout)
            and ``knowledge_options`` for `open_knowledge_store`.
    """
    return await MemoryStore.open(
        url,
        embedder=embedder,
        namespace=namespace,
        model=model,
        dedup_threshold=dedup_threshold,
        limits=limits,
        **options,
    )
