"""Long-term memory: facts about users, kept across sessions, searched by meaning and keywords.

The library under the memory service and the memory middleware. `MemoryStore` keeps each
memory as a document of a `hookmesh.retrieval.KnowledgeStore` (SQLite by default, PostgreSQL
+ pgvector to scale out), one knowledge base per user; `MemoryClient`
(`hookmesh.client`) offers the same `Memories` interface over gRPC.
"""

from ._embedcache import CachingEmbedder
from ._extract import DEFAULT_EXTRACTION_INSTRUCTION, Fact, extract, parse_facts, transcript
from ._layout import knowledge_base_of, new_memory_id
from ._limits import MEMORY_ID, memory_not_found
from ._store import DEFAULT_DEDUP_THRESHOLD, MemoryStore, open_memory_store
from ._types import (
    AddedMemory,
    AddOutcome,
    AddResult,
    ExtractionOutcome,
    Memories,
    Memory,
    MemoryHit,
    MemoryLimits,
    MemoryMetadata,
    MemoryOrigin,
    MemoryPage,
    MemoryScope,
)

__all__ = [
    "DEFAULT_DEDUP_THRESHOLD",
    "DEFAULT_EXTRACTION_INSTRUCTION",
    "MEMORY_ID",
    "AddOutcome",
    "AddResult",
    "AddedMemory",
    "CachingEmbedder",
    "ExtractionOutcome",
    "Fact",
    "Memories",
    "Memory",
    "MemoryHit",
    "MemoryLimits",
    "MemoryMetadata",
    "MemoryOrigin",
    "MemoryPage",
    "MemoryScope",
    "MemoryStore",
    "extract",
    "knowledge_base_of",
    "memory_not_found",
    "new_memory_id",
    "open_memory_store",
    "parse_facts",
    "transcript",
]
