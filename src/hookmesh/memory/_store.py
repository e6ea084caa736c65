"""`MemoryStore`: long-term memories as documents of a knowledge store, one base per user."""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

from hookmesh.agent.models import ChatModel
from hookmesh.errors import HookmeshError, SchemaError
from hookmesh.retrieval import (
    MAX_TOP_K,
    ChunkingOptions,
    Document,
    Embedder,
    Hit,
    KnowledgeStore,
    MetadataValue,
    SearchMode,
    default_embedder,
    open_knowledge_store,
)
from hookmesh.schema import AgenticMessage, FlatMessage, Message, check_messages

from ._embedcache import CachingEmbedder
from ._extract import DEFAULT_EXTRACTION_INSTRUCTION, Fact, extract
from ._layout import (
    AGENT,
    CREATED,
    USER,
    fuse,
    is_whole,
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
    check_page,
    check_scope,
    check_search,
    check_text,
    check_user_and_id,
    memory_not_found,
)
from ._types import (
    AddedMemory,
    AddResult,
    Memory,
    MemoryHit,
    MemoryLimits,
    MemoryMetadata,
    MemoryPage,
    MemoryScope,
)

DEFAULT_DEDUP_THRESHOLD = 0.95
"""Cosine similarity at or above which a new fact is merged into an existing memory."""

_DEPTH = (20, 4)  # per-leg candidates: max(20, 4 * top_k), at most the store's top_k bound
_LOCK_STRIPES = 64
_IMPORT_BATCH = 256
_DELETE_PAGE = 500
_MAX_METADATA_KEYS = 24  # the knowledge store's 32, less the layout's own 8


class MemoryStore:
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
        self._locks = [asyncio.Lock() for _ in range(_LOCK_STRIPES)]
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

    # -- plumbing ---------------------------------------------------------------------------

    def _lock(self, user_id: str) -> asyncio.Lock:
        return self._locks[zlib.crc32(user_id.encode("utf-8", "surrogatepass")) % _LOCK_STRIPES]

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

    # -- writes -----------------------------------------------------------------------------

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
        hits = await self._leg(text, kb, "dense", 1, self.dedup_threshold, wanted)
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

    # -- reads ------------------------------------------------------------------------------

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
