"""How a memory is laid out as a knowledge-store document, and how search legs are fused."""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from hookmesh.errors import HookmeshError
from hookmesh.retrieval import Hit, MetadataValue, reciprocal_rank_fusion

from ._types import Memory, MemoryOrigin, MemoryScope

USER, AGENT, SESSION = "user_id", "agent_id", "session_id"
"""Metadata keys of the scope (matched exactly by reads that name them)."""
CREATED, UPDATED = "hm.create_time", "hm.update_time"
SOURCES, ORIGIN, CHARS = "hm.sources", "hm.origin", "hm.chars"
META = "meta."
"""Prefix of the caller's metadata keys, so they never collide with the keys above."""

_KB_PREFIX = "memory-"
_MAX_SOURCES_JSON = 2000  # the knowledge store caps string metadata at 2048 characters
_MISSING = frozenset({"KNOWLEDGE_BASE_NOT_FOUND", "DOCUMENT_NOT_FOUND"})


def knowledge_base_of(user_id: str) -> str:
    """The knowledge base holding `user_id`'s memories (a name the store accepts)."""
    return _KB_PREFIX + hashlib.sha256(user_id.encode("utf-8", "surrogatepass")).hexdigest()[:40]


def new_memory_id() -> str:
    """A fresh id: nanoseconds since the epoch then 64 random bits, in hex (sorts by time)."""
    return f"{time.time_ns():016x}{os.urandom(8).hex()}"


def now() -> str:
    """The current time as stored (ISO 8601, UTC)."""
    return datetime.now(UTC).isoformat()


def missing(exc: HookmeshError) -> bool:
    """Whether a store error says the user's base or the document does not exist."""
    return exc.reason in _MISSING


def merge_sources(old: Sequence[str], new: Sequence[str]) -> list[str]:
    """Old then new ids, each once; the oldest dropped until the JSON fits the store."""
    merged = list(dict.fromkeys([*old, *new]))
    while merged and len(json.dumps(merged)) > _MAX_SOURCES_JSON:
        merged.pop(0)
    return merged


def read_filter(scope: MemoryScope) -> dict[str, MetadataValue]:
    """What narrows a read within the user's base: the agent and session when set."""
    out: dict[str, MetadataValue] = {}
    if scope.agent_id is not None:
        out[AGENT] = scope.agent_id
    if scope.session_id is not None:
        out[SESSION] = scope.session_id
    return out


def layout(
    scope: MemoryScope,
    text: str,
    created: str,
    updated: str,
    sources: Sequence[str],
    origin: MemoryOrigin,
    metadata: Mapping[str, MetadataValue],
) -> dict[str, MetadataValue]:
    """The document metadata of a memory: scope, bookkeeping, then the caller's keys.

    The scope ids are always present (None as JSON null), so "no agent" can be matched.
    """
    out: dict[str, MetadataValue] = {
        USER: scope.user_id,
        AGENT: scope.agent_id,
        SESSION: scope.session_id,
        CREATED: created,
        UPDATED: updated,
        SOURCES: json.dumps(list(sources)),
        ORIGIN: origin,
        CHARS: len(text),
    }
    out.update({META + k: v for k, v in metadata.items()})
    return out


def _str(value: MetadataValue) -> str | None:
    return value if isinstance(value, str) else None


def memory_of(memory_id: str, text: str, stored: Mapping[str, MetadataValue]) -> Memory:
    """The memory a document holds."""
    sources = json.loads(_str(stored.get(SOURCES)) or "[]")
    origin = stored.get(ORIGIN)
    return Memory(
        id=memory_id,
        text=text,
        scope=MemoryScope(
            str(stored.get(USER, "")), _str(stored.get(AGENT)), _str(stored.get(SESSION))
        ),
        metadata={k[len(META) :]: v for k, v in stored.items() if k.startswith(META)},
        create_time=datetime.fromisoformat(str(stored[CREATED])),
        update_time=datetime.fromisoformat(str(stored[UPDATED])),
        source_message_ids=tuple(str(s) for s in sources),
        origin=origin if origin in ("fact", "extracted", "verbatim") else "fact",  # type: ignore[arg-type]
    )


def is_whole(hit: Hit) -> bool:
    """Whether a hit's chunk is the memory's whole text (a long one spans chunks)."""
    return hit.metadata.get(CHARS) == len(hit.text)


def fuse(
    dense: Sequence[Hit], lexical: Sequence[Hit], user_id: str, rrf_k: int, threshold: float
) -> list[tuple[Hit, float, float | None]]:
    """One ranking of memories from the two legs' chunk hits: ``(hit, fused score,
    similarity)``, best first.

    Each leg ranks a memory by its best chunk; the legs are merged by reciprocal rank. With a
    threshold, only memories the dense leg returned (so at or above it) remain. A hit of
    another user (impossible: each user has a base) is dropped, as defence in depth.
    """
    hits: dict[str, Hit] = {}
    similarity: dict[str, float] = {}
    rankings: list[list[str]] = []
    for leg in (dense, lexical):
        ranking: dict[str, None] = {}
        for hit in leg:
            if hit.document_id in ranking or hit.metadata.get(USER) != user_id:
                continue
            ranking[hit.document_id] = None
            hits.setdefault(hit.document_id, hit)
            if leg is dense:
                similarity[hit.document_id] = hit.score
        rankings.append(list(ranking))
    fused = reciprocal_rank_fusion(rankings, rrf_k)
    if threshold:
        fused = [f for f in fused if f.key in similarity]
    return [(hits[f.key], f.score, similarity.get(f.key)) for f in fused]
