"""`KnowledgeStore`: the backend-independent half of every store (validation, chunking,
embedding, rank fusion); backends supply storage and the two searches."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime
from types import TracebackType

from hookmesh.errors import SchemaError

from ._backend import (
    DocumentWrite,
    Filter,
    KnowledgeBaseRef,
    StoreBackend,
    content_hash,
    query_terms,
)
from ._chunker import Chunker
from ._embedder import Embedder, RegexTokenizer, Tokenizer
from ._fusion import DEFAULT_RRF_K, reciprocal_rank_fusion
from ._limits import (
    Limits,
    check_chunking,
    check_description,
    check_document_id,
    check_documents,
    check_knowledge_base_name,
    check_metadata,
    check_search,
    document_not_found,
    embedder_mismatch,
    knowledge_base_not_found,
)
from ._types import (
    ChunkingOptions,
    Document,
    Hit,
    IngestResult,
    KnowledgeBase,
    MetadataValue,
    SearchMode,
    StoredDocument,
)

_HYBRID_DEPTH = (20, 4, 200)  # per-leg candidates: max(20, 4 * top_k), at most 200
_MAX_LIST = 1000
_RANKINGS = 3  # tries of a search whose ranked chunks a concurrent write deleted


class KnowledgeStore(StoreBackend):
    """Knowledge bases of chunked, embedded documents, searched densely, lexically or both.

    All methods are coroutines that never block the event loop (database calls and the
    model run in worker threads). One store may be shared by any number of tasks.
    Open one with `hookmesh.retrieval.open_knowledge_store`.

    Errors are `hookmesh.errors.HookmeshError`s carrying a gRPC code and a stable reason:
    ``INVALID_ARGUMENT`` (`SchemaError`: ``INVALID_SCHEMA``, ``DOCUMENT_TOO_LARGE``,
    ``BATCH_TOO_LARGE``), ``NOT_FOUND`` (``KNOWLEDGE_BASE_NOT_FOUND``,
    ``DOCUMENT_NOT_FOUND``), ``ALREADY_EXISTS`` (``KNOWLEDGE_BASE_EXISTS``),
    ``FAILED_PRECONDITION`` (``EMBEDDER_MISMATCH``).

    Args:
        embedder: Makes the vectors (share one per process: `default_embedder`).
        tokenizer: Counts tokens for chunking; default: the embedder's ``tokenizer``
            attribute, else a word/punctuation approximation.
        limits: Request bounds.
        rrf_k: The reciprocal-rank-fusion constant.
    """

    backend: str = "abstract"
    """``sqlite`` or ``postgresql``."""

    def __init__(
        self,
        embedder: Embedder,
        *,
        tokenizer: Tokenizer | None = None,
        limits: Limits | None = None,
        rrf_k: int = DEFAULT_RRF_K,
    ) -> None:
        if rrf_k <= 0:
            raise ValueError("rrf_k must be positive")
        self.embedder = embedder
        self._tokenizer = tokenizer
        self.limits = limits or Limits()
        self.rrf_k = rrf_k

    @property
    def tokenizer(self) -> Tokenizer:
        """The tokenizer chunks are counted with."""
        if self._tokenizer is None:
            own = getattr(self.embedder, "tokenizer", None)
            self._tokenizer = own if isinstance(own, Tokenizer) else RegexTokenizer()
        return self._tokenizer

    async def __aenter__(self) -> KnowledgeStore:
        return self

    async def __aexit__(
        self,
        unused_type: type[BaseException] | None,
        unused_value: BaseException | None,
        unused_tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- knowledge bases --------------------------------------------------------------------

    async def create_knowledge_base(
        self,
        name: str,
        description: str = "",
        chunking: ChunkingOptions | None = None,
        *,
        owner: str = "",
    ) -> KnowledgeBase:
        """Create an empty knowledge base, recording `owner` (the creating principal).

        Raises:
            SchemaError: Bad name, description or chunking options.
            RequestError: ``KNOWLEDGE_BASE_EXISTS``.
        """
        check_knowledge_base_name(name, "knowledge_base.name")
        check_description(description, "knowledge_base.description")
        chunking = chunking or ChunkingOptions()
        if not isinstance(chunking, ChunkingOptions):
            raise TypeError("chunking must be ChunkingOptions")
        check_chunking(chunking, self.tokenizer.max_input_tokens, "knowledge_base.chunking")
        return await self._create_knowledge_base(
            name, description, chunking, self.embedder.name, self.embedder.dimension, owner
        )

    async def get_knowledge_base(self, name: str) -> KnowledgeBase:
        """The knowledge base with its document and chunk counts.

        Raises:
            RequestError: ``KNOWLEDGE_BASE_NOT_FOUND``.
        """
        check_knowledge_base_name(name)
        found = await self._get_knowledge_base(name)
        if found is None:
            raise knowledge_base_not_found(name)
        return found

    async def list_knowledge_bases(self) -> list[KnowledgeBase]:
        """Every knowledge base, by name."""
        return await self._list_knowledge_bases()

    async def delete_knowledge_base(self, name: str, *, allow_missing: bool = False) -> bool:
        """Delete a knowledge base and all its documents.

        Returns:
            False when it did not exist (only with `allow_missing`).

        Raises:
            RequestError: ``KNOWLEDGE_BASE_NOT_FOUND`` unless `allow_missing`.
        """
        check_knowledge_base_name(name)
        deleted = await self._delete_knowledge_base(name)
        if not deleted and not allow_missing:
            raise knowledge_base_not_found(name)
        return deleted

    # -- documents --------------------------------------------------------------------------

    async def ingest(
        self, knowledge_base: str, documents: Sequence[Document], *, owner: str = ""
    ) -> list[IngestResult]:
        """Add or replace documents by id; returns once they are durably committed. Each
        new or replaced text is recorded as `owner`'s (the ingesting user), which
        `forget_owner` and `owned_documents` find; an unchanged one keeps its owner.

        A document whose text (and the base's chunking and embedder) is unchanged is not
        chunked or embedded again; a changed one has all its chunks replaced in the same
        transaction as the rest of the batch, so a search sees the old or the new version,
        never a mix.

        Raises:
            SchemaError: A bad or oversized document or batch.
            RequestError: ``KNOWLEDGE_BASE_NOT_FOUND``, ``EMBEDDER_MISMATCH``.
        """
        checked = check_documents(documents, self.limits)
        (kb,) = await self._resolve([knowledge_base], need_embedder=True)
        existing = await self._existing(kb, [doc.id for doc, _ in checked])
        results: list[IngestResult] = []
        writes: list[DocumentWrite] = []
        to_chunk: list[tuple[Document, Filter, str]] = []
        for doc, metadata in checked:
            digest = content_hash(kb.embedder, kb.chunking, doc.text)
            old = existing.get(doc.id)
            if old is not None and old.content_hash == digest:
                if old.metadata == metadata:
                    results.append(IngestResult(doc.id, "unchanged", old.chunk_count))
                else:
                    results.append(IngestResult(doc.id, "metadata_updated", old.chunk_count))
                    writes.append(DocumentWrite(doc.id, doc.text, metadata, digest, None, None))
            else:
                results.append(IngestResult(doc.id, "created" if old is None else "replaced", -1))
                to_chunk.append((doc, metadata, digest))
        if to_chunk:
            chunker = Chunker(self.tokenizer, kb.chunking)
            chunked = await asyncio.to_thread(
                lambda: [chunker.chunk(doc.id, doc.text, meta) for doc, meta, _ in to_chunk]
            )
            texts = [chunk.text for chunks in chunked for chunk in chunks]
            vectors = await self.embedder.embed(texts)
            if vectors.shape != (len(texts), kb.dimension):
                raise RuntimeError(
                    f"embedder {self.embedder.name} returned {vectors.shape}, "
                    f"expected ({len(texts)}, {kb.dimension})"
                )
            offset = 0
            counts = {}
            for (doc, meta, digest), chunks in zip(to_chunk, chunked, strict=True):
                rows = vectors[offset : offset + len(chunks)]
                offset += len(chunks)
                writes.append(DocumentWrite(doc.id, doc.text, meta, digest, chunks, rows, owner))
                counts[doc.id] = len(chunks)
            results = [
                IngestResult(r.document_id, r.status, counts[r.document_id])
                if r.chunk_count < 0
                else r
                for r in results
            ]
        if writes:
            await self._write(kb, writes)
        return results

    async def get_document(self, knowledge_base: str, document_id: str) -> StoredDocument:
        """The stored document.

        Raises:
            RequestError: ``KNOWLEDGE_BASE_NOT_FOUND``, ``DOCUMENT_NOT_FOUND``.
        """
        check_document_id(document_id, "document_id")
        (kb,) = await self._resolve([knowledge_base])
        found = await self._get_document(kb, document_id)
        if found is None:
            raise document_not_found(knowledge_base, document_id)
        return found

    async def list_documents(
        self,
        knowledge_base: str,
        *,
        metadata_filter: dict[str, MetadataValue] | None = None,
        limit: int = 100,
        after: str | None = None,
    ) -> list[StoredDocument]:
        """Documents by id, texts included: a page of at most `limit` after the id `after`.

        Raises:
            SchemaError: Bad filter or limit (1-1000).
            RequestError: ``KNOWLEDGE_BASE_NOT_FOUND``.
        """
        wanted = check_metadata(metadata_filter or {}, "metadata_filter", self.limits)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= _MAX_LIST:
            raise SchemaError.single("limit", f"an integer 1-{_MAX_LIST}")
        (kb,) = await self._resolve([knowledge_base])
        return await self._list_documents(kb, wanted, limit, after)

    async def delete_document(
        self, knowledge_base: str, document_id: str, *, allow_missing: bool = False
    ) -> bool:
        """Delete a document and its chunks (committed durably before returning).

        Returns:
            False when it did not exist (only with `allow_missing`).

        Raises:
            RequestError: ``KNOWLEDGE_BASE_NOT_FOUND``; ``DOCUMENT_NOT_FOUND`` unless
                `allow_missing`.
        """
        check_document_id(document_id, "document_id")
        (kb,) = await self._resolve([knowledge_base])
        deleted = await self._delete_document(kb, document_id)
        if not deleted and not allow_missing:
            raise document_not_found(knowledge_base, document_id)
        return deleted

    async def owned_page(
        self, owner: str, limit: int, after: tuple[str, str] | None = None
    ) -> tuple[list[StoredDocument], tuple[str, str] | None]:
        """Up to `limit` of the documents `owner` ingested (their latest version is
        theirs), over all bases by base name then id, after the ``(base, id)`` cursor
        `after`; and the cursor of the next page (None after the last)."""
        ids = await self._owned(owner, limit, after)
        refs = await self._refs(sorted({name for name, _ in ids})) if ids else {}
        found: list[StoredDocument] = []
        for name, document_id in ids:
            ref = refs.get(name)
            doc = await self._get_document(ref, document_id) if ref is not None else None
            if doc is not None:  # deleted meanwhile otherwise
                found.append(doc)
        return found, (ids[-1] if len(ids) == limit else None)

    async def forget_owner(self, owner: str, *, page: int = 100) -> int:
        """Delete every document `owner` ingested, with its chunks, in every base (others'
        documents in shared bases stay); how many went."""
        deleted = 0
        while ids := await self._owned(owner, page, None):
            refs = await self._refs(sorted({name for name, _ in ids}))
            for name, document_id in ids:
                ref = refs.get(name)  # a base deleted meanwhile took its documents along
                if ref is not None:
                    deleted += await self._delete_document(ref, document_id)
        return deleted

    async def sweep(self, before: datetime, limit: int) -> int:
        """Delete up to `limit` documents last written before `before` (oldest first, over
        every base), with their chunks: one bounded round of retention. How many went."""
        ids = await self._stale(before, limit)
        refs = await self._refs(sorted({name for name, _ in ids})) if ids else {}
        deleted = 0
        for name, document_id in ids:
            ref = refs.get(name)
            if ref is not None:
                deleted += await self._delete_document(ref, document_id)
        return deleted

    # -- search -----------------------------------------------------------------------------

    async def search(
        self,
        query: str,
        knowledge_bases: Sequence[str],
        *,
        mode: SearchMode = "hybrid",
        top_k: int = 5,
        score_threshold: float | None = None,
        metadata_filter: dict[str, MetadataValue] | None = None,
    ) -> list[Hit]:
        """The best chunks for `query` in the named knowledge bases.

        Each base contributes one ranking per leg (dense: cosine over its vectors; lexical:
        full-text relevance). Rankings are merged by reciprocal rank fusion
        (``1 / (rrf_k + rank)`` summed), never by raw scores, which differ in scale between
        legs and between bases. See `Hit.score` for what the reported score is.

        Args:
            query: The question or keywords.
            knowledge_bases: 1-16 base names; duplicates are ignored.
            mode: ``dense``, ``lexical`` or ``hybrid``.
            top_k: 1-50 hits at most.
            score_threshold: Drop hits whose reported score is below it (cosine in dense
                mode, lexical relevance in lexical mode, fused score in hybrid mode).
            metadata_filter: Only chunks whose document metadata has each key with exactly
                this value (numbers compare numerically; booleans are not numbers).

        Raises:
            SchemaError: Bad query, names, mode, top_k, threshold or filter.
            RequestError: ``KNOWLEDGE_BASE_NOT_FOUND``, ``EMBEDDER_MISMATCH``.
        """
        query, names, mode = check_search(
            query, knowledge_bases, mode, top_k, score_threshold, self.limits
        )
        wanted = check_metadata(metadata_filter or {}, "metadata_filter", self.limits)
        kbs = await self._resolve(names, need_embedder=mode != "lexical")
        if mode == "hybrid":
            low, factor, high = _HYBRID_DEPTH
            depth = min(max(low, factor * top_k), high)
        else:
            depth = top_k
        # NOTE(retrieval): a backend without one snapshot for ranking and reading back
        # (SQLite: each read on a connection of its own, the dense index in memory) may rank
        # chunks that a re-ingest deletes before they are read; ranking again finds the new
        # version, so a search answers neither a mix nor nothing for a document that exists.
        for _ in range(_RANKINGS - 1):
            hits, whole = await self._search_once(query, kbs, mode, depth, wanted, top_k,
                                                  score_threshold)  # fmt: skip
            if whole:
                return hits
        hits, _ = await self._search_once(query, kbs, mode, depth, wanted, top_k, score_threshold)
        return hits

    async def _search_once(
        self,
        query: str,
        kbs: list[KnowledgeBaseRef],
        mode: SearchMode,
        depth: int,
        wanted: Filter,
        top_k: int,
        score_threshold: float | None,
    ) -> tuple[list[Hit], bool]:
        """One ranking and read-back; whether every ranked chunk was still there."""
        async with self._snapshot():
            rankings = await self._rankings(query, kbs, mode, depth, wanted)
            if mode != "hybrid" and score_threshold is not None:
                rankings = [[(k, s) for k, s in r if s >= score_threshold] for r in rankings]
            native = {key: score for ranking in rankings for key, score in ranking}
            fused = reciprocal_rank_fusion([[k for k, _ in r] for r in rankings], self.rrf_k)
            if mode == "hybrid" and score_threshold is not None:
                fused = [f for f in fused if f.score >= score_threshold]
            top = fused[:top_k]
            scored = [(f.key, f.score if mode == "hybrid" else native[f.key]) for f in top]
            hits = await self._hits(kbs, scored)
        return hits, len(hits) == len(scored)

    async def _rankings(
        self,
        query: str,
        kbs: list[KnowledgeBaseRef],
        mode: SearchMode,
        depth: int,
        wanted: Filter,
    ) -> list[list[tuple[tuple[int, int], float]]]:
        """One ranking per knowledge base and leg, of ``((base index, chunk key), score)``."""
        calls = []
        if mode != "lexical":
            vector = (await self.embedder.embed([query]))[0]
            calls += [self._dense(kb, vector, depth, wanted) for kb in kbs]
        if mode != "dense":
            terms = query_terms(query)
            calls += [
                self._lexical(kb, terms, depth, wanted) if terms else _nothing() for kb in kbs
            ]
        ranked = await asyncio.gather(*calls)
        return [
            [((i % len(kbs), key), score) for key, score in ranking]
            for i, ranking in enumerate(ranked)
        ]

    async def _hits(
        self, kbs: list[KnowledgeBaseRef], scored: list[tuple[tuple[int, int], float]]
    ) -> list[Hit]:
        """Read the chunks back, in order, skipping any deleted since they were ranked."""
        by_kb: dict[int, list[int]] = {}
        for (i, chunk_key), _ in scored:
            by_kb.setdefault(i, []).append(chunk_key)
        fetched = await asyncio.gather(*(self._fetch(kbs[i], keys) for i, keys in by_kb.items()))
        rows = {
            (i, k): row for i, found in zip(by_kb, fetched, strict=True) for k, row in found.items()
        }
        hits: list[Hit] = []
        for key, score in scored:
            row = rows.get(key)
            if row is not None:
                hits.append(
                    Hit(
                        knowledge_base=kbs[key[0]].name,
                        document_id=row.document_id,
                        chunk_id=f"{row.document_id}#{row.index}",
                        text=row.text,
                        score=score,
                        rank=len(hits) + 1,
                        metadata=row.metadata,
                        start=row.start,
                        end=row.end,
                    )
                )
        return hits

    async def _resolve(
        self, names: Sequence[str], *, need_embedder: bool = False
    ) -> list[KnowledgeBaseRef]:
        for i, name in enumerate(names):
            check_knowledge_base_name(
                name, f"knowledge_bases[{i}]" if len(names) > 1 else "knowledge_base"
            )
        found = await self._refs(names)
        out = []
        for name in names:
            ref = found.get(name)
            if ref is None:
                raise knowledge_base_not_found(name)
            if need_embedder and (
                ref.embedder != self.embedder.name or ref.dimension != self.embedder.dimension
            ):
                raise embedder_mismatch(name, ref.embedder, self.embedder.name)
            out.append(ref)
        return out


async def _nothing() -> list[tuple[int, float]]:
    return []
