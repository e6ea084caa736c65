"""The retrieval library's value types: knowledge bases, documents, chunks and search hits."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

MetadataValue = str | int | float | bool | None
"""A metadata value: a JSON scalar. Filters match values exactly (numbers numerically)."""

Metadata = Mapping[str, MetadataValue]
"""Metadata of a document (and so of each of its chunks)."""

SearchMode = Literal["dense", "lexical", "hybrid"]
"""How a search ranks chunks: embedding similarity, full-text relevance, or both fused."""

SEARCH_MODES: tuple[SearchMode, ...] = ("dense", "lexical", "hybrid")
"""Every search mode."""

IngestStatus = Literal["created", "replaced", "unchanged", "metadata_updated"]
"""What an ingest did to one document."""


@dataclass(frozen=True, slots=True)
class ChunkingOptions:
    """How a knowledge base cuts documents into chunks (fixed when the base is created)."""

    max_tokens: int = 128
    """Most tokens of the embedder's tokenizer in one chunk (special tokens not counted)."""
    overlap_tokens: int = 32
    """Most tokens of whole trailing sentences a chunk repeats from the one before it, when
    the cut falls inside a paragraph; a sentence longer than a chunk is windowed with exactly
    this many tokens of overlap."""


@dataclass(frozen=True, slots=True)
class KnowledgeBase:
    """A named collection of documents, searched as one ranking."""

    name: str
    """Unique name: 1-63 of ``a-z 0-9 _ -``, starting with a letter."""
    description: str
    """Free text for people and agents (a RAG tool may show it)."""
    chunking: ChunkingOptions
    """How its documents are chunked."""
    embedder: str
    """Name of the embedder whose vectors it holds; searching it needs the same embedder."""
    dimension: int
    """Dimension of those vectors."""
    create_time: datetime
    """When it was created (UTC)."""
    document_count: int = 0
    """Documents in it when read."""
    chunk_count: int = 0
    """Chunks in it when read."""
    owner: str = ""
    """The principal that created it; empty when created without one (a library caller, or
    before owners were recorded)."""


@dataclass(frozen=True, slots=True)
class Document:
    """A document to ingest; its id is unique within a knowledge base."""

    id: str
    """1-256 characters, no control characters. Re-ingesting an id replaces that document."""
    text: str
    """The text, chunked and indexed as a whole."""
    metadata: Metadata = field(default_factory=dict)
    """JSON scalars by key, returned with every hit and matched by search filters."""


@dataclass(frozen=True, slots=True)
class StoredDocument:
    """A document as stored."""

    id: str
    """The document id."""
    knowledge_base: str
    """The knowledge base holding it."""
    text: str
    """The full text."""
    metadata: Metadata
    """Its metadata."""
    chunk_count: int
    """How many chunks it was cut into (0 for an empty or blank text)."""
    create_time: datetime
    """First ingest (UTC)."""
    update_time: datetime
    """Last ingest that changed it (UTC)."""


@dataclass(frozen=True, slots=True)
class IngestResult:
    """The outcome of ingesting one document."""

    document_id: str
    """The document id."""
    status: IngestStatus
    """``created``; ``replaced`` (new text: chunks re-made); ``metadata_updated`` (same text,
    new metadata: nothing re-embedded); ``unchanged`` (same text and metadata: nothing done)."""
    chunk_count: int
    """Chunks the document has now."""


@dataclass(frozen=True, slots=True)
class Chunk:
    """One window of a document's text."""

    id: str
    """``{document_id}#{index}``: deterministic, so re-ingesting yields the same ids."""
    document_id: str
    """The document it comes from."""
    index: int
    """0-based position in the document."""
    text: str
    """``document.text[start:end]``."""
    start: int
    """Offset of its first character in the document text (Python ``str`` index)."""
    end: int
    """Offset one past its last character."""
    token_count: int
    """Tokens of the chunker's tokenizer in it."""
    metadata: Metadata = field(default_factory=dict)
    """The document's metadata."""


@dataclass(frozen=True, slots=True)
class Hit:
    """One search result."""

    knowledge_base: str
    """The knowledge base it came from."""
    document_id: str
    """Its document."""
    chunk_id: str
    """``{document_id}#{index}``."""
    text: str
    """The chunk text."""
    score: float
    """``dense``: cosine similarity (-1..1); ``lexical``: the backend's full-text relevance
    (> 0, higher is better; not comparable between backends); ``hybrid``: the reciprocal rank
    fusion score. Across knowledge bases the order is by rank fusion, so in ``dense`` and
    ``lexical`` mode scores of hits from different bases need not decrease with rank."""
    rank: int
    """1-based position in the result."""
    metadata: Metadata
    """The document's metadata."""
    start: int
    """Character offset of the chunk in its document."""
    end: int
    """Character offset one past the chunk's end."""
