"""Memory records to and from their memory.proto messages (shared by servicer and client)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from google.protobuf import struct_pb2, timestamp_pb2

from hookmesh.schema import struct_from_proto, timestamp_from_proto
from hookmesh.v1 import memory_pb2 as _pb

from ._types import (
    AddedMemory,
    AddOutcome,
    AddResult,
    ExtractionOutcome,
    Memory,
    MemoryHit,
    MemoryOrigin,
    MemoryScope,
)

ORIGIN_TO_PB: dict[MemoryOrigin, int] = {
    "fact": _pb.MEMORY_ORIGIN_FACT,
    "extracted": _pb.MEMORY_ORIGIN_EXTRACTED,
    "verbatim": _pb.MEMORY_ORIGIN_VERBATIM,
}
ORIGIN_FROM_PB: dict[int, MemoryOrigin] = {v: k for k, v in ORIGIN_TO_PB.items()}
OUTCOME_TO_PB: dict[AddOutcome, int] = {
    "created": _pb.ADD_OUTCOME_CREATED,
    "merged": _pb.ADD_OUTCOME_MERGED,
}
OUTCOME_FROM_PB: dict[int, AddOutcome] = {v: k for k, v in OUTCOME_TO_PB.items()}
EXTRACTION_TO_PB: dict[ExtractionOutcome, int] = {
    "none": _pb.EXTRACTION_OUTCOME_UNSPECIFIED,
    "extracted": _pb.EXTRACTION_OUTCOME_EXTRACTED,
    "no_model": _pb.EXTRACTION_OUTCOME_NO_MODEL,
    "fallback": _pb.EXTRACTION_OUTCOME_FALLBACK,
}
EXTRACTION_FROM_PB: dict[int, ExtractionOutcome] = {v: k for k, v in EXTRACTION_TO_PB.items()}


def scope_to_pb(scope: MemoryScope) -> _pb.MemoryScope:
    """The proto of a scope (None ids become empty strings)."""
    return _pb.MemoryScope(
        user_id=scope.user_id, agent_id=scope.agent_id or "", session_id=scope.session_id or ""
    )


def scope_from_pb(pb: _pb.MemoryScope) -> MemoryScope:
    """A scope from its proto (empty ids become None; validation is the store's)."""
    return MemoryScope(pb.user_id, pb.agent_id or None, pb.session_id or None)


def struct_of(metadata: Mapping[str, Any]) -> struct_pb2.Struct:
    """Metadata as a Struct."""
    out = struct_pb2.Struct()
    out.update(dict(metadata))
    return out


def metadata_of(pb: struct_pb2.Struct, path: str = "metadata") -> dict[str, Any]:
    """Metadata from a Struct (integral numbers come back as ints).

    Raises:
        SchemaError: A NaN or infinite number, reported at `path`.
    """
    return struct_from_proto(pb, path)  # type: ignore[no-any-return]


def _timestamp(value: Any) -> timestamp_pb2.Timestamp:
    out = timestamp_pb2.Timestamp()
    out.FromDatetime(value)
    return out


def memory_to_pb(memory: Memory) -> _pb.Memory:
    """The proto of a memory."""
    return _pb.Memory(
        id=memory.id,
        text=memory.text,
        scope=scope_to_pb(memory.scope),
        metadata=struct_of(memory.metadata),
        create_time=_timestamp(memory.create_time),
        update_time=_timestamp(memory.update_time),
        source_message_ids=list(memory.source_message_ids),
        origin=ORIGIN_TO_PB[memory.origin],  # type: ignore[arg-type]
    )


def memory_from_pb(pb: _pb.Memory) -> Memory:
    """A memory from its proto."""
    return Memory(
        id=pb.id,
        text=pb.text,
        scope=scope_from_pb(pb.scope),
        metadata=metadata_of(pb.metadata),
        create_time=timestamp_from_proto(pb.create_time, "memory.create_time"),
        update_time=timestamp_from_proto(pb.update_time, "memory.update_time"),
        source_message_ids=tuple(pb.source_message_ids),
        origin=ORIGIN_FROM_PB.get(pb.origin, "fact"),
    )


def hit_to_pb(hit: MemoryHit) -> _pb.MemoryHit:
    """The proto of a search hit."""
    out = _pb.MemoryHit(memory=memory_to_pb(hit.memory), score=hit.score, rank=hit.rank)
    if hit.similarity is not None:
        out.similarity = hit.similarity
    return out


def hit_from_pb(pb: _pb.MemoryHit) -> MemoryHit:
    """A search hit from its proto."""
    similarity = pb.similarity if pb.HasField("similarity") else None
    return MemoryHit(memory_from_pb(pb.memory), pb.score, similarity, pb.rank)


def add_result_to_pb(result: AddResult) -> _pb.AddMemoriesResponse:
    """The AddMemories response for an add's result."""
    return _pb.AddMemoriesResponse(
        memories=[
            _pb.AddedMemory(
                memory=memory_to_pb(m.memory),
                outcome=OUTCOME_TO_PB[m.outcome],  # type: ignore[arg-type]
            )
            for m in result.memories
        ],
        extraction=EXTRACTION_TO_PB[result.extraction],  # type: ignore[arg-type]
    )


def add_result_from_pb(pb: _pb.AddMemoriesResponse) -> AddResult:
    """An add's result from its AddMemories response."""
    return AddResult(
        [
            AddedMemory(memory_from_pb(m.memory), OUTCOME_FROM_PB.get(m.outcome, "created"))
            for m in pb.memories
        ],
        EXTRACTION_FROM_PB.get(pb.extraction, "none"),
    )
