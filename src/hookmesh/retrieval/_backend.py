"""What a storage backend exchanges with `KnowledgeStore`: row shapes and shared helpers."""

from __future__ import annotations

import abc
import hashlib
import json
import re
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass
from datetime import datetime

from ._embedder import Vectors
from ._types import Chunk, ChunkingOptions, KnowledgeBase, MetadataValue, StoredDocument

_TERM = re.compile(r"[^\W_]+")
_MAX_TERMS = 64
# NOTE(retrieval): PostgreSQL's `english` stop words (snowball), dropped from queries on every
# backend, so SQLite's FTS5 (which keeps them) ranks like PostgreSQL and a word like "is"
# does not make every chunk a lexical match.
STOP_WORDS = frozenset(
    """i me my myself we our ours ourselves you your yours yourself yourselves he him his
    himself she her hers herself it its itself they them their theirs themselves what which
    who whom this that these those am is are was were be been being have has had having do
    does did doing a an the and but if or because as until while of at by for with about
    against between into through during before after above below to from up down in out on
    off over under again further then once here there when where why how all any both each
    few more most other some such no nor not only own same so than too very s t can will
    just don should now""".split()  # noqa: SIM905
)

Filter = dict[str, MetadataValue]


@dataclass(frozen=True, slots=True)
class KnowledgeBaseRef:
    """A knowledge base as a backend addresses it."""

    key: int
    """The backend's row id."""
    name: str
    """Its name."""
    chunking: ChunkingOptions
    """Its chunking options."""
    embedder: str
    """The embedder its vectors come from."""
    dimension: int
    """Their dimension."""


@dataclass(frozen=True, slots=True)
class ExistingDocument:
    """What ingest needs to know about a stored document."""

    content_hash: str
    """Hash of the embedder, chunking options and text it was indexed with."""
    metadata: Filter
    """Its metadata."""
    chunk_count: int
    """Its chunks."""


@dataclass(frozen=True, slots=True)
class DocumentWrite:
    """One document to store: chunks and vectors replace the old ones, or (both None) only
    the metadata changes."""

    document_id: str
    """The id."""
    text: str
    """The full text."""
    metadata: Filter
    """The metadata."""
    content_hash: str
    """See `ExistingDocument.content_hash`."""
    chunks: list[Chunk] | None
    """The new chunks, or None for a metadata-only update."""
    vectors: Vectors | None
    """One row per chunk."""
    owner: str = ""
    """The user whose ingest wrote this version (kept by a metadata-only update); empty
    for documents a service stores for itself."""


@dataclass(frozen=True, slots=True)
class ChunkRow:
    """A chunk read back for a hit."""

    document_id: str
    """Its document."""
    index: int
    """Its position."""
    text: str
    """Its text."""
    start: int
    """Start offset."""
    end: int
    """End offset."""
    metadata: Filter
    """The document's metadata."""


def query_terms(query: str) -> list[str]:
    """The words of `query` for full-text search: runs of letters and digits, lower-cased,
    English stop words dropped, unique, at most 64."""
    seen: dict[str, None] = {}
    for match in _TERM.finditer(query.lower()):
        if match.group() in STOP_WORDS:
            continue
        seen.setdefault(match.group(), None)
        if len(seen) == _MAX_TERMS:
            break
    return list(seen)


def content_hash(embedder: str, chunking: ChunkingOptions, text: str) -> str:
    """What decides whether a re-ingested text must be chunked and embedded again."""
    digest = hashlib.sha256()
    digest.update(f"{embedder}\0{chunking.max_tokens}\0{chunking.overlap_tokens}\0".encode())
    digest.update(text.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def dump_metadata(metadata: Filter) -> str:
    """Canonical JSON for metadata."""
    return json.dumps(metadata, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


class StoreBackend(abc.ABC):
    """The storage half of a `KnowledgeStore`: what a backend implements.

    Inputs are validated and knowledge bases resolved before these are called; chunk keys
    are the backend's own integer row ids.
    """

    @abc.abstractmethod
    async def close(self) -> None:
        """Release connections and threads; the store is unusable after."""

    def _snapshot(self) -> AbstractAsyncContextManager[None]:
        """One consistent view for all the reads of a search (ranking, then fetching rows),
        so a concurrent re-ingest can never make ranked chunks vanish or versions mix.
        A backend whose reads already see one state needs nothing."""
        return nullcontext()

    @abc.abstractmethod
    async def _create_knowledge_base(
        self,
        name: str,
        description: str,
        chunking: ChunkingOptions,
        embedder: str,
        dimension: int,
        owner: str,
    ) -> KnowledgeBase: ...

    @abc.abstractmethod
    async def _get_knowledge_base(self, name: str) -> KnowledgeBase | None: ...

    @abc.abstractmethod
    async def _list_knowledge_bases(self) -> list[KnowledgeBase]: ...

    @abc.abstractmethod
    async def _delete_knowledge_base(self, name: str) -> bool: ...

    @abc.abstractmethod
    async def _refs(self, names: Sequence[str]) -> dict[str, KnowledgeBaseRef]: ...

    @abc.abstractmethod
    async def _existing(
        self, kb: KnowledgeBaseRef, document_ids: list[str]
    ) -> dict[str, ExistingDocument]: ...

    @abc.abstractmethod
    async def _write(self, kb: KnowledgeBaseRef, writes: list[DocumentWrite]) -> None:
        """Apply all writes in one durable transaction."""

    @abc.abstractmethod
    async def _get_document(
        self, kb: KnowledgeBaseRef, document_id: str
    ) -> StoredDocument | None: ...

    @abc.abstractmethod
    async def _list_documents(
        self, kb: KnowledgeBaseRef, metadata_filter: Filter, limit: int, after: str | None
    ) -> list[StoredDocument]: ...

    @abc.abstractmethod
    async def _delete_document(self, kb: KnowledgeBaseRef, document_id: str) -> bool: ...

    @abc.abstractmethod
    async def _owned(
        self, owner: str, limit: int, after: tuple[str, str] | None
    ) -> list[tuple[str, str]]:
        """Up to `limit` ``(base name, document id)`` of the documents `owner` wrote, in
        that order, after the `after` pair."""

    @abc.abstractmethod
    async def _stale(self, before: datetime, limit: int) -> list[tuple[str, str]]:
        """Up to `limit` ``(base name, document id)`` of documents last written before
        `before`, oldest first."""

    @abc.abstractmethod
    async def _dense(
        self,
        kb: KnowledgeBaseRef,
        vector: Vectors,
        depth: int,
        metadata_filter: Filter,
    ) -> list[tuple[int, float]]:
        """Up to `depth` ``(chunk key, cosine)`` for the unit `vector` (one row), best first."""

    @abc.abstractmethod
    async def _lexical(
        self, kb: KnowledgeBaseRef, terms: list[str], depth: int, metadata_filter: Filter
    ) -> list[tuple[int, float]]:
        """Up to `depth` ``(chunk key, relevance > 0)`` matching any term, best first."""

    @abc.abstractmethod
    async def _fetch(self, kb: KnowledgeBaseRef, keys: list[int]) -> dict[int, ChunkRow]: ...
