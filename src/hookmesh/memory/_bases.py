"""The storage under `MemoryStore`: one knowledge base per user, created on first use,
re-created if another replica dropped it, with a lock stripe per user and one ranking of a
user's memories at a time."""

from __future__ import annotations

import asyncio
import zlib

from hookmesh.errors import HookmeshError
from hookmesh.retrieval import (
    MAX_TOP_K,
    ChunkingOptions,
    Document,
    Hit,
    KnowledgeStore,
    MetadataValue,
    SearchMode,
)

from ._layout import is_whole, missing
from ._types import MemoryLimits

LOCK_STRIPES = 64
"""Locks shared by all users (a user always maps to the same one)."""


class UserBases:
    """Per-user knowledge bases of a knowledge store (`MemoryStore` builds on this; it is
    not a public extension point)."""

    knowledge: KnowledgeStore
    limits: MemoryLimits
    _locks: list[asyncio.Lock]
    _bases: set[str]

    def _lock(self, user_id: str) -> asyncio.Lock:
        return self._locks[zlib.crc32(user_id.encode("utf-8", "surrogatepass")) % LOCK_STRIPES]

    async def _ensure_base(self, kb: str) -> None:
        if kb in self._bases:
            return
        try:
            await self.knowledge.get_knowledge_base(kb)
        except HookmeshError as exc:
            if not missing(exc):
                raise
            max_tokens = min(254, self.knowledge.tokenizer.max_input_tokens)
            try:
                await self.knowledge.create_knowledge_base(
                    kb, "long-term memories of one user", ChunkingOptions(max_tokens, 32)
                )
            except HookmeshError as exists:  # another replica created it meanwhile
                if exists.reason != "KNOWLEDGE_BASE_EXISTS":
                    raise
        self._bases.add(kb)

    async def _ingest(self, kb: str, documents: list[Document]) -> None:
        """Ingest, re-creating the base once if another replica dropped it meanwhile."""
        try:
            await self.knowledge.ingest(kb, documents)
        except HookmeshError as exc:
            if exc.reason != "KNOWLEDGE_BASE_NOT_FOUND":
                raise
            self._bases.discard(kb)
            await self._ensure_base(kb)
            await self.knowledge.ingest(kb, documents)

    async def _whole(self, kb: str, hit: Hit) -> str:
        """The memory's full text (a hit holds one chunk; memories are rarely longer)."""
        if is_whole(hit):
            return hit.text
        return (await self.knowledge.get_document(kb, hit.document_id)).text

    async def _leg(
        self,
        query: str,
        kb: str,
        mode: SearchMode,
        depth: int,
        threshold: float | None,
        wanted: dict[str, MetadataValue],
    ) -> list[Hit]:
        """One ranking of the user's base, narrowed to `wanted` (agent, session).

        NOTE(memory): a metadata filter makes the SQLite store scan every row's JSON, so a
        narrowed leg first ranks the whole base as deep as the store allows and keeps the
        matching hits. That is exactly the filtered ranking when enough of them remain (or
        the wide ranking was complete); only otherwise is the filtered search run.
        """
        search = self.knowledge.search
        if not wanted:
            return await search(query, [kb], mode=mode, top_k=depth, score_threshold=threshold)
        wide = await search(query, [kb], mode=mode, top_k=MAX_TOP_K, score_threshold=threshold)
        kept = [h for h in wide if all(h.metadata.get(k) == v for k, v in wanted.items())]
        if len(kept) >= depth or len(wide) < MAX_TOP_K:
            return kept[:depth]
        return await search(
            query, [kb], mode=mode, top_k=depth, score_threshold=threshold, metadata_filter=wanted
        )
