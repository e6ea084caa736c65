"""Writing memories: adding facts (merged into near duplicates), bulk import, update and
deletion."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hookmesh.errors import HookmeshError, SchemaError
from hookmesh.models import ChatModel
from hookmesh.retrieval import Document, MetadataValue
from hookmesh.schema import AgenticMessage, FlatMessage, Message, check_messages

from ._extract import Fact, extract
from ._layout import (
    AGENT,
    CREATED,
    USER,
    knowledge_base_of,
    layout,
    memory_of,
    merge_sources,
    missing,
    new_memory_id,
    now,
    read_filter,
)
from ._limits import (
    check_metadata,
    check_scope,
    check_text,
    check_user_and_id,
    memory_not_found,
)
from ._reads import MemoryReads
from ._types import AddedMemory, AddResult, Memory, MemoryMetadata, MemoryScope

_IMPORT_BATCH = 256
_DELETE_PAGE = 500


class MemoryWrites(MemoryReads):
    """The write half of `MemoryStore` (not a public extension point)."""

    model: ChatModel | None
    dedup_threshold: float
    extraction_instruction: str
    extraction_timeout: float

    async def add(
        self,
        scope: MemoryScope,
        *,
        facts: Sequence[str] = (),
        messages: Sequence[Message] = (),
        metadata: MemoryMetadata | None = None,
    ) -> AddResult:
        """Store facts as they are, or facts extracted from conversation messages.

        Give exactly one of `facts` and `messages`. Messages (either kind) go to the
        extraction model; see `extract` for what is stored without one or when its answer
        is invalid. Returns once every memory is durably committed.

        Raises:
            SchemaError: A bad scope, fact, message, metadata, or both/neither given.
        """
        scope = check_scope(scope)
        meta = check_metadata(metadata, self.limits)
        if isinstance(facts, str) or isinstance(messages, FlatMessage | AgenticMessage):
            raise SchemaError.single("facts", "pass a list of facts or messages, not one")
        if bool(facts) == bool(messages):
            raise SchemaError.single("facts", "set exactly one of facts and messages")
        items: list[Fact]
        if facts:
            if len(facts) > self.limits.max_facts:
                raise SchemaError.single(
                    "facts", f"{len(facts)} facts; the limit is {self.limits.max_facts}"
                )
            items = [
                Fact(check_text(f, f"facts[{i}]", self.limits), "fact") for i, f in enumerate(facts)
            ]
            outcome: Any = "none"
        else:
            if len(messages) > self.limits.max_messages:
                raise SchemaError.single(
                    "messages", f"{len(messages)} messages; the limit is {self.limits.max_messages}"
                )
            check_messages(list(messages), "messages")
            items, outcome = await extract(
                messages,
                self.model,
                instruction=self.extraction_instruction,
                timeout=self.extraction_timeout,
                max_facts=self.limits.max_facts,
                max_chars=self.limits.max_text_chars,
            )
        kb = knowledge_base_of(scope.user_id)
        added: list[AddedMemory] = []
        if items:
            async with self._lock(scope.user_id):
                await self._ensure_base(kb)
                for item in items:
                    added.append(await self._add_one(kb, scope, item, meta))
        return AddResult(added, outcome)

    async def _near_duplicate(
        self, kb: str, scope: MemoryScope, text: str
    ) -> tuple[str, str, Mapping[str, MetadataValue]] | None:
        """The id, full text and metadata of a memory of the same user and agent whose
        cosine similarity with `text` reaches the threshold, if any."""
        if self.dedup_threshold > 1:
            return None
        wanted: dict[str, MetadataValue] = {AGENT: scope.agent_id}
        # A fact may be longer than a search query may be. The embedder reads only the first
        # few hundred tokens of a text (MiniLM: 256), well inside the query limit for any
        # prose, so the prefix ranks as the whole fact would.
        query = text[: self.knowledge.limits.max_query_chars]
        hits = await self._leg(query, kb, "dense", 1, self.dedup_threshold, wanted)
        for hit in hits:
            if hit.metadata.get(USER) == scope.user_id:
                return hit.document_id, await self._whole(kb, hit), hit.metadata
        return None

    async def _add_one(
        self, kb: str, scope: MemoryScope, fact: Fact, meta: dict[str, MetadataValue]
    ) -> AddedMemory:
        stamp = now()
        found = await self._near_duplicate(kb, scope, fact.text)
        if found is not None:
            memory_id, text, stored = found
            old = memory_of(memory_id, text, stored)
            kept = {k: v for k, v in old.metadata.items() if k not in meta}
            room = max(0, self.limits.max_metadata_keys - len(meta))
            merged = layout(
                old.scope,
                text,
                str(stored[CREATED]),
                stamp,
                merge_sources(old.source_message_ids, fact.sources),
                old.origin,
                {**dict(list(kept.items())[:room]), **meta},
            )
            await self._ingest(kb, [Document(memory_id, text, merged)])
            return AddedMemory(memory_of(memory_id, text, merged), "merged")
        memory_id = new_memory_id()
        sources = merge_sources((), fact.sources)
        fresh = layout(scope, fact.text, stamp, stamp, sources, fact.origin, meta)
        await self._ingest(kb, [Document(memory_id, fact.text, fresh)])
        return AddedMemory(memory_of(memory_id, fact.text, fresh), "created")

    async def import_memories(
        self,
        scope: MemoryScope,
        texts: Sequence[str],
        *,
        metadata: MemoryMetadata | None = None,
        batch: int = _IMPORT_BATCH,
    ) -> int:
        """Bulk-load facts without the near-duplicate check (migrations, benchmarks).

        Texts are committed in batches of `batch` (one transaction each).

        Returns:
            How many memories were stored.

        Raises:
            SchemaError: A bad scope, text or metadata.
        """
        scope = check_scope(scope)
        meta = check_metadata(metadata, self.limits)
        checked = [check_text(t, f"texts[{i}]", self.limits) for i, t in enumerate(texts)]
        kb = knowledge_base_of(scope.user_id)
        async with self._lock(scope.user_id):
            await self._ensure_base(kb)
        for start in range(0, len(checked), max(1, batch)):
            stamp = now()
            documents = [
                Document(new_memory_id(), t, layout(scope, t, stamp, stamp, (), "fact", meta))
                for t in checked[start : start + max(1, batch)]
            ]
            await self._ingest(kb, documents)
        return len(checked)

    async def update(
        self,
        user_id: str,
        memory_id: str,
        *,
        text: str | None = None,
        metadata: MemoryMetadata | None = None,
    ) -> Memory:
        """Replace a memory's text (re-indexed), its caller metadata, or both.

        Raises:
            SchemaError: Bad ids, a blank text, bad metadata, or nothing to change.
            RequestError: ``MEMORY_NOT_FOUND``.
        """
        user_id, memory_id = check_user_and_id(user_id, memory_id)
        if text is None and metadata is None:
            raise SchemaError.single("text", "set text, metadata or both")
        new_text = check_text(text, "text", self.limits) if text is not None else None
        new_meta = check_metadata(metadata, self.limits) if metadata is not None else None
        kb = knowledge_base_of(user_id)
        async with self._lock(user_id):
            old = await self.get(user_id, memory_id)
            body = new_text if new_text is not None else old.text
            stored = layout(
                old.scope,
                body,
                old.create_time.isoformat(),
                now(),
                old.source_message_ids,
                old.origin,
                new_meta if new_meta is not None else old.metadata,
            )
            await self._ingest(kb, [Document(memory_id, body, stored)])
        return memory_of(memory_id, body, stored)

    async def delete(self, user_id: str, memory_id: str) -> None:
        """Delete one memory (committed durably before returning).

        Raises:
            RequestError: ``MEMORY_NOT_FOUND``.
        """
        user_id, memory_id = check_user_and_id(user_id, memory_id)
        kb = knowledge_base_of(user_id)
        async with self._lock(user_id):
            try:
                await self.knowledge.delete_document(kb, memory_id)
            except HookmeshError as exc:
                if missing(exc):
                    raise memory_not_found(memory_id) from None
                raise

    async def delete_all(self, scope: MemoryScope) -> int:
        """Delete every memory of the scope.

        A scope of only a user drops the user's whole knowledge base (fast); naming an agent
        or a session deletes the matching memories one by one.

        Returns:
            How many memories were deleted.
        """
        scope = check_scope(scope)
        kb = knowledge_base_of(scope.user_id)
        wanted = read_filter(scope)
        async with self._lock(scope.user_id):
            if not wanted:
                try:
                    count = (await self.knowledge.get_knowledge_base(kb)).document_count
                except HookmeshError as exc:
                    if missing(exc):
                        return 0
                    raise
                await self.knowledge.delete_knowledge_base(kb, allow_missing=True)
                self._bases.discard(kb)
                return count
            count = 0
            while True:
                try:
                    page = await self.knowledge.list_documents(
                        kb, metadata_filter=wanted, limit=_DELETE_PAGE
                    )
                except HookmeshError as exc:
                    if missing(exc):
                        return count
                    raise
                for doc in page:
                    if await self.knowledge.delete_document(kb, doc.id, allow_missing=True):
                        count += 1
                if len(page) < _DELETE_PAGE:
                    return count
