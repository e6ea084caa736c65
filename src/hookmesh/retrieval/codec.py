"""Retrieval values to and from their protobuf messages (shared by the servicer and client)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from google.protobuf import json_format, struct_pb2, timestamp_pb2

from hookmesh.errors import SchemaError
from hookmesh.retrieval import (
    ChunkingOptions,
    Document,
    Hit,
    KnowledgeBase,
    Metadata,
    SearchMode,
    StoredDocument,
)
from hookmesh.schema import timestamp_from_proto
from hookmesh.v1 import retrieval_pb2 as _pb

TITLE_KEY = "title"
"""Metadata key a document's title is kept under."""

MODE_TO_PB: dict[SearchMode, int] = {
    "dense": _pb.SEARCH_MODE_DENSE,
    "lexical": _pb.SEARCH_MODE_LEXICAL,
    "hybrid": _pb.SEARCH_MODE_HYBRID,
}
MODE_FROM_PB: dict[int, SearchMode] = {
    _pb.SEARCH_MODE_UNSPECIFIED: "hybrid",
    **{number: mode for mode, number in MODE_TO_PB.items()},
}
_EXACT_INT = 2**53


def _plain(value: Any) -> Any:
    """A Struct value as Python: integral doubles (exact in a double) become ints."""
    if isinstance(value, float) and value.is_integer() and abs(value) <= _EXACT_INT:
        return int(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def struct_to_dict(struct: struct_pb2.Struct, path: str = "metadata") -> dict[str, Any]:
    """A Struct as a plain dict (nested values kept, for the store to refuse by field).

    Raises:
        SchemaError: A NaN or infinite number, reported at `path`.
    """
    try:
        values = json_format.MessageToDict(struct)
    except ValueError:
        raise SchemaError.single(
            path, "numbers must be finite: NaN and infinity are not JSON"
        ) from None
    return {key: _plain(value) for key, value in values.items()}


def dict_to_struct(values: Mapping[str, Any] | None) -> struct_pb2.Struct:
    """A mapping of JSON values as a Struct (numbers become doubles)."""
    struct = struct_pb2.Struct()
    if values:
        struct.update(dict(values))
    return struct


def _time(dt: datetime) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(dt)
    return stamp


def _from_time(stamp: timestamp_pb2.Timestamp, path: str) -> datetime:
    return timestamp_from_proto(stamp, path)


def knowledge_base_to_pb(kb: KnowledgeBase) -> _pb.KnowledgeBase:
    """The proto of a knowledge base."""
    return _pb.KnowledgeBase(
        name=kb.name,
        description=kb.description,
        chunking=_pb.ChunkingOptions(
            max_tokens=kb.chunking.max_tokens, overlap_tokens=kb.chunking.overlap_tokens
        ),
        embedder=kb.embedder,
        document_count=kb.document_count,
        chunk_count=kb.chunk_count,
        create_time=_time(kb.create_time),
        dimension=kb.dimension,
        owner=kb.owner,
    )


def knowledge_base_from_pb(pb: _pb.KnowledgeBase) -> KnowledgeBase:
    """A knowledge base from its proto."""
    return KnowledgeBase(
        name=pb.name,
        description=pb.description,
        chunking=ChunkingOptions(pb.chunking.max_tokens, pb.chunking.overlap_tokens),
        embedder=pb.embedder,
        dimension=pb.dimension,
        create_time=_from_time(pb.create_time, "knowledge_base.create_time"),
        document_count=pb.document_count,
        chunk_count=pb.chunk_count,
        owner=pb.owner,
    )


def document_to_pb(doc: Document | StoredDocument) -> _pb.Document:
    """The proto of a document; its title is its ``title`` metadata, when a string."""
    title = doc.metadata.get(TITLE_KEY)
    return _pb.Document(
        id=doc.id,
        title=title if isinstance(title, str) else "",
        text=doc.text,
        metadata=dict_to_struct(doc.metadata),
    )


def document_from_pb(pb: _pb.Document) -> Document:
    """A document to ingest: a non-empty title is stored as ``title`` metadata."""
    metadata = struct_to_dict(pb.metadata, "document.metadata")
    if pb.title:
        metadata[TITLE_KEY] = pb.title
    return Document(pb.id, pb.text, metadata)


def stored_document_to_pb(doc: StoredDocument) -> _pb.GetDocumentResponse:
    """A GetDocument answer."""
    return _pb.GetDocumentResponse(
        document=document_to_pb(doc),
        chunk_count=doc.chunk_count,
        create_time=_time(doc.create_time),
        update_time=_time(doc.update_time),
    )


def stored_document_from_pb(knowledge_base: str, pb: _pb.GetDocumentResponse) -> StoredDocument:
    """A stored document from a GetDocument answer."""
    metadata: Metadata = struct_to_dict(pb.document.metadata, "document.metadata")
    return StoredDocument(
        id=pb.document.id,
        knowledge_base=knowledge_base,
        text=pb.document.text,
        metadata=metadata,
        chunk_count=pb.chunk_count,
        create_time=_from_time(pb.create_time, "create_time"),
        update_time=_from_time(pb.update_time, "update_time"),
    )


def hit_to_pb(hit: Hit) -> _pb.SearchHit:
    """The proto of a search hit."""
    return _pb.SearchHit(
        knowledge_base=hit.knowledge_base,
        document_id=hit.document_id,
        chunk_id=hit.chunk_id,
        text=hit.text,
        score=hit.score,
        rank=hit.rank,
        metadata=dict_to_struct(hit.metadata),
        start=hit.start,
        end=hit.end,
    )


def hit_from_pb(pb: _pb.SearchHit) -> Hit:
    """A search hit from its proto."""
    return Hit(
        knowledge_base=pb.knowledge_base,
        document_id=pb.document_id,
        chunk_id=pb.chunk_id,
        text=pb.text,
        score=pb.score,
        rank=pb.rank,
        metadata=struct_to_dict(pb.metadata, "hit.metadata"),
        start=pb.start,
        end=pb.end,
    )
