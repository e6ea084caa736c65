"""Retrieval: embed, chunk, store and search documents (dense, lexical, hybrid by rank fusion).

The library under the retrieval service, reused by the memory service: one `Embedder`
(`MiniLMEmbedder`, shared per process via `default_embedder`), one `Chunker`, and one
`KnowledgeStore` interface with an embedded SQLite backend and a PostgreSQL + pgvector one,
opened by URL with `open_knowledge_store`.
"""

from ._chunker import Chunker
from ._dense import DenseIndex
from ._embedder import Embedder, RegexTokenizer, Tokenizer, Vectors, l2_normalise
from ._fusion import DEFAULT_RRF_K, Fused, reciprocal_rank_fusion
from ._limits import MAX_TOP_K, Limits, check_metadata, check_search_terms
from ._minilm import (
    MODEL_NAME,
    EmbedderUnavailableError,
    MiniLMEmbedder,
    WordPieceTokenizer,
    default_embedder,
    model_file,
    tokenizer_file,
)
from ._open import open_knowledge_store
from ._postgres import PostgresKnowledgeStore
from ._sqlite import SqliteKnowledgeStore
from ._sqlitedb import SqliteDatabase, fts5_available
from ._store import KnowledgeStore
from ._types import (
    SEARCH_MODES,
    Chunk,
    ChunkingOptions,
    Document,
    Hit,
    IngestResult,
    IngestStatus,
    KnowledgeBase,
    Metadata,
    MetadataValue,
    SearchMode,
    StoredDocument,
)

__all__ = [
    "DEFAULT_RRF_K",
    "MAX_TOP_K",
    "MODEL_NAME",
    "SEARCH_MODES",
    "Chunk",
    "Chunker",
    "ChunkingOptions",
    "DenseIndex",
    "Document",
    "Embedder",
    "EmbedderUnavailableError",
    "Fused",
    "Hit",
    "IngestResult",
    "IngestStatus",
    "KnowledgeBase",
    "KnowledgeStore",
    "Limits",
    "Metadata",
    "MetadataValue",
    "MiniLMEmbedder",
    "PostgresKnowledgeStore",
    "RegexTokenizer",
    "SearchMode",
    "SqliteDatabase",
    "SqliteKnowledgeStore",
    "StoredDocument",
    "Tokenizer",
    "Vectors",
    "WordPieceTokenizer",
    "check_metadata",
    "check_search_terms",
    "default_embedder",
    "fts5_available",
    "l2_normalise",
    "model_file",
    "open_knowledge_store",
    "reciprocal_rank_fusion",
    "tokenizer_file",
]
