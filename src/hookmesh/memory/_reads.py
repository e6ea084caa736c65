"""Reading memories: one by id, a hybrid search, and pages of a scope."""

from __future__ import annotations

import asyncio

from hookmesh.errors import HookmeshError

from ._bases import UserBases
from ._layout import USER, fuse, knowledge_base_of, memory_of, missing, read_filter
from ._limits import check_page, check_scope, check_search, check_user_and_id, memory_not_found
from ._types import Memory, MemoryHit, MemoryPage, MemoryScope

_DEPTH = (20, 4)  # per-leg candidates: max(20, 4 * top_k), at most the store's top_k bound


class MemoryReads(UserBases):
    """The read half of `MemoryStore` (not a public extension point)."""

    async def get(self, user_id: str, memory_id: str) -> Memory:
        """One memory of `user_id`.

        Raises:
            RequestError: ``MEMORY_NOT_FOUND`` (also when it is another user's).
        """
        user_id, memory_id = check_user_and_id(user_id, memory_id)
        try:
            doc = await self.knowledge.get_document(knowledge_base_of(user_id), memory_id)
        except HookmeshError as exc:
            if missing(exc):
                raise memory_not_found(memory_id) from None
            raise
        if doc.metadata.get(USER) != user_id:
            raise memory_not_found(memory_id)
        return memory_of(doc.id, doc.text, doc.metadata)

    async def search(
        self, query: str, scope: MemoryScope, *, top_k: int = 5, score_threshold: float = 0.0
    ) -> list[MemoryHit]:
        """The scope's memories best matching `query`.

        Two rankings of the scope's memories, by meaning (cosine of embeddings) and by
        keywords (full-text relevance), fused by reciprocal rank. With a `score_threshold`
        (a cosine floor, e.g. 0.3), only memories the meaning ranking found at or above it
        remain; keywords still reorder them.

        Args:
            query: What to look for.
            scope: The user, optionally narrowed to an agent and/or session.
            top_k: 1-50 (0 means 5).
            score_threshold: -1 to 1; 0 keeps all.

        Raises:
            SchemaError: Bad scope, query, top_k or threshold.
        """
        scope = check_scope(scope)
        query, top_k, threshold = check_search(query, top_k, score_threshold, self.limits)
        kb = knowledge_base_of(scope.user_id)
        low, factor = _DEPTH
        depth = min(max(low, factor * top_k), self.limits.max_top_k)
        wanted = read_filter(scope)
        try:
            dense, lexical = await asyncio.gather(
                self._leg(query, kb, "dense", depth, threshold or None, wanted),
                self._leg(query, kb, "lexical", depth, None, wanted),
            )
        except HookmeshError as exc:
            if missing(exc):
                return []
            raise
        out: list[MemoryHit] = []
        ranked = fuse(dense, lexical, scope.user_id, self.knowledge.rrf_k, threshold)
        for hit, score, similarity in ranked:
            try:
                text = await self._whole(kb, hit)
            except HookmeshError as exc:  # deleted since it was ranked
                if missing(exc):
                    continue
                raise
            memory = memory_of(hit.document_id, text, hit.metadata)
            out.append(MemoryHit(memory, score, similarity, len(out) + 1))
            if len(out) == top_k:
                break
        return out

    async def list(
        self, scope: MemoryScope, *, page_size: int = 50, page_token: str = ""
    ) -> MemoryPage:
        """One page of the scope's memories, oldest first.

        Raises:
            SchemaError: Bad scope, page size (1-500; 0 means 50) or token.
        """
        scope = check_scope(scope)
        size, after = check_page(page_size, page_token, self.limits)
        try:
            docs = await self.knowledge.list_documents(
                knowledge_base_of(scope.user_id),
                metadata_filter=read_filter(scope),
                limit=size + 1,
                after=after,
            )
        except HookmeshError as exc:
            if missing(exc):
                return MemoryPage([])
            raise
        memories = [
            memory_of(d.id, d.text, d.metadata)
            for d in docs[:size]
            if d.metadata.get(USER) == scope.user_id
        ]
        return MemoryPage(memories, docs[size - 1].id if len(docs) > size else "")
