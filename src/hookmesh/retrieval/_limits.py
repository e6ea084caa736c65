"""Bounds on retrieval requests, their validation, and the errors stores raise."""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from hookmesh.errors import FieldViolation, RequestError, SchemaError

from ._types import SEARCH_MODES, ChunkingOptions, Document, MetadataValue, SearchMode

MAX_TOP_K = 50
"""Most hits one search returns."""

_KB_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_MAX_DOC_ID = 256
_MAX_DESCRIPTION = 1024
_MAX_METADATA_KEY = 128
_MIN_CHUNK_TOKENS = 8


@dataclass(frozen=True, slots=True)
class Limits:
    """Request bounds a store enforces; a service may lower them."""

    max_document_chars: int = 1_000_000
    """Longest document text, in characters."""
    max_batch_documents: int = 256
    """Most documents in one ingest call."""
    max_batch_chars: int = 4_000_000
    """Most characters of text in one ingest call."""
    max_metadata_keys: int = 32
    """Most metadata keys on one document or in one filter."""
    max_metadata_value_chars: int = 2048
    """Longest string metadata value."""
    max_query_chars: int = 4096
    """Longest search query."""
    max_knowledge_bases_per_search: int = 16
    """Most knowledge bases one search may name."""


def knowledge_base_not_found(name: str) -> RequestError:
    """NOT_FOUND / ``KNOWLEDGE_BASE_NOT_FOUND``."""
    return RequestError(
        grpc.StatusCode.NOT_FOUND,
        "KNOWLEDGE_BASE_NOT_FOUND",
        f"there is no knowledge base {name!r}",
        metadata={"knowledgeBase": name},
    )


def knowledge_base_exists(name: str) -> RequestError:
    """ALREADY_EXISTS / ``KNOWLEDGE_BASE_EXISTS``."""
    return RequestError(
        grpc.StatusCode.ALREADY_EXISTS,
        "KNOWLEDGE_BASE_EXISTS",
        f"a knowledge base named {name!r} already exists; delete it first or pick another name",
        metadata={"knowledgeBase": name},
    )


def document_not_found(knowledge_base: str, document_id: str) -> RequestError:
    """NOT_FOUND / ``DOCUMENT_NOT_FOUND``."""
    return RequestError(
        grpc.StatusCode.NOT_FOUND,
        "DOCUMENT_NOT_FOUND",
        f"knowledge base {knowledge_base!r} has no document {document_id!r}",
        metadata={"knowledgeBase": knowledge_base, "documentId": document_id},
    )


def embedder_mismatch(knowledge_base: str, stored: str, current: str) -> RequestError:
    """FAILED_PRECONDITION / ``EMBEDDER_MISMATCH``: vectors of another model are stored."""
    return RequestError(
        grpc.StatusCode.FAILED_PRECONDITION,
        "EMBEDDER_MISMATCH",
        f"knowledge base {knowledge_base!r} holds vectors of embedder {stored!r}, but this "
        f"store embeds with {current!r}; open it with {stored!r} or re-create the base",
        metadata={"knowledgeBase": knowledge_base, "storedEmbedder": stored, "embedder": current},
    )


def check_knowledge_base_name(name: Any, field: str = "name") -> str:
    """The name, if it follows the rules.

    Raises:
        SchemaError: ``INVALID_SCHEMA`` naming `field`.
    """
    if not isinstance(name, str) or not _KB_NAME.fullmatch(name):
        raise SchemaError.single(
            field,
            "a knowledge base name is 1-63 characters of a-z, 0-9, '_' and '-', "
            f"starting with a letter; got {name!r:.80}",
        )
    return name


def check_description(description: Any, field: str = "description") -> str:
    """The description, if it is a short enough string.

    Raises:
        SchemaError: ``INVALID_SCHEMA``.
    """
    if not isinstance(description, str) or len(description) > _MAX_DESCRIPTION:
        raise SchemaError.single(field, f"a string of at most {_MAX_DESCRIPTION} characters")
    return description


def check_chunking(options: ChunkingOptions, max_input_tokens: int, field: str) -> None:
    """Chunk sizes the embedder can take whole, with an overlap that still makes progress.

    Raises:
        SchemaError: ``INVALID_SCHEMA`` naming the bad option.
    """
    if not isinstance(options.max_tokens, int) or not (
        _MIN_CHUNK_TOKENS <= options.max_tokens <= max_input_tokens
    ):
        raise SchemaError.single(
            f"{field}.max_tokens",
            f"must be {_MIN_CHUNK_TOKENS}-{max_input_tokens} (the embedder reads at most "
            f"{max_input_tokens} tokens); got {options.max_tokens!r}",
        )
    if not isinstance(options.overlap_tokens, int) or not (
        0 <= options.overlap_tokens <= options.max_tokens // 2
    ):
        raise SchemaError.single(
            f"{field}.overlap_tokens",
            f"must be 0-{options.max_tokens // 2} (at most half of max_tokens); "
            f"got {options.overlap_tokens!r}",
        )


def _has_control(text: str) -> bool:
    return any(unicodedata.category(c) == "Cc" for c in text)


def check_document_id(document_id: Any, field: str) -> str:
    """The id, if it is 1-256 characters without control characters.

    Raises:
        SchemaError: ``INVALID_SCHEMA``.
    """
    if (
        not isinstance(document_id, str)
        or not 1 <= len(document_id) <= _MAX_DOC_ID
        or _has_control(document_id)
    ):
        raise SchemaError.single(
            field, f"a document id is 1-{_MAX_DOC_ID} characters without control characters"
        )
    return document_id


def _check_scalar(value: Any, field: str, limits: Limits) -> MetadataValue:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if not -(2**63) <= value < 2**63:
            raise SchemaError.single(field, "integers must fit in 64 bits")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise SchemaError.single(field, "numbers must be finite")
        return value
    if isinstance(value, str):
        if len(value) > limits.max_metadata_value_chars:
            raise SchemaError.single(
                field, f"strings are at most {limits.max_metadata_value_chars} characters"
            )
        return value
    raise SchemaError.single(
        field,
        f"values are JSON scalars (string, number, boolean, null); got {type(value).__name__}",
    )


def check_metadata(
    metadata: Any, field: str, limits: Limits, *, max_key_chars: int = _MAX_METADATA_KEY
) -> dict[str, MetadataValue]:
    """A plain dict copy of `metadata`, if its keys and values follow the rules.

    Keys are 1-`max_key_chars` (128) characters without control characters, ``"`` or
    ``\\``; values are JSON scalars. Used for document metadata and search filters alike, and
    by stores built on documents (memory) for their own metadata.

    Raises:
        SchemaError: ``INVALID_SCHEMA`` naming the first bad key or value.
    """
    if not isinstance(metadata, Mapping):
        raise SchemaError.single(field, "must be a mapping of string keys to scalar values")
    if len(metadata) > limits.max_metadata_keys:
        raise SchemaError.single(field, f"at most {limits.max_metadata_keys} keys")
    out: dict[str, MetadataValue] = {}
    for key, value in metadata.items():
        if (
            not isinstance(key, str)
            or not 1 <= len(key) <= max_key_chars
            or _has_control(key)
            or '"' in key
            or "\\" in key
        ):
            raise SchemaError.single(
                field,
                f"keys are 1-{max_key_chars} characters without control characters, "
                f"'\"' or '\\'; got {key!r:.80}",
            )
        out[key] = _check_scalar(value, f"{field}[{key}]", limits)
    return out


def check_documents(
    documents: Sequence[Document], limits: Limits
) -> list[tuple[Document, dict[str, MetadataValue]]]:
    """Each document with its validated metadata, if the batch is within bounds.

    Raises:
        SchemaError: ``INVALID_SCHEMA`` (bad id, metadata, duplicate id), ``BATCH_TOO_LARGE``
            or ``DOCUMENT_TOO_LARGE``.
    """
    if isinstance(documents, Document) or not isinstance(documents, Sequence):
        raise SchemaError.single("documents", "pass a sequence of documents")
    if len(documents) > limits.max_batch_documents:
        raise SchemaError.single(
            "documents",
            f"{len(documents)} documents in one call; the limit is {limits.max_batch_documents}",
            reason="BATCH_TOO_LARGE",
        )
    seen: set[str] = set()
    total = 0
    out = []
    for i, doc in enumerate(documents):
        where = f"documents[{i}]"
        if not isinstance(doc, Document):
            raise SchemaError.single(where, "must be a Document")
        check_document_id(doc.id, f"{where}.id")
        if doc.id in seen:
            raise SchemaError.single(f"{where}.id", f"document id {doc.id!r} appears twice")
        seen.add(doc.id)
        if not isinstance(doc.text, str):
            raise SchemaError.single(f"{where}.text", "must be a string")
        if len(doc.text) > limits.max_document_chars:
            raise SchemaError.single(
                f"{where}.text",
                f"{len(doc.text)} characters; the limit is {limits.max_document_chars}: "
                "split the document",
                reason="DOCUMENT_TOO_LARGE",
            )
        total += len(doc.text)
        out.append((doc, check_metadata(doc.metadata, f"{where}.metadata", limits)))
    if total > limits.max_batch_chars:
        raise SchemaError.single(
            "documents",
            f"{total} characters in one call; the limit is {limits.max_batch_chars}",
            reason="BATCH_TOO_LARGE",
        )
    return out


def check_search(
    query: Any,
    knowledge_bases: Any,
    mode: Any,
    top_k: Any,
    score_threshold: Any,
    limits: Limits,
) -> tuple[str, list[str], SearchMode]:
    """The query, the de-duplicated base names in order, and the mode, if all are in bounds.

    Raises:
        SchemaError: ``INVALID_SCHEMA`` listing every bad field.
    """
    violations = _term_violations(query, mode, top_k, score_threshold, limits)
    names: list[str] = []
    if isinstance(knowledge_bases, str) or not isinstance(knowledge_bases, Sequence):
        violations.append(FieldViolation("knowledge_bases", "a list of knowledge base names"))
    elif not 1 <= len(knowledge_bases) <= limits.max_knowledge_bases_per_search:
        violations.append(
            FieldViolation(
                "knowledge_bases",
                f"name 1-{limits.max_knowledge_bases_per_search} knowledge bases",
            )
        )
    else:
        for i, name in enumerate(knowledge_bases):
            if not isinstance(name, str) or not _KB_NAME.fullmatch(name):
                violations.append(
                    FieldViolation(
                        f"knowledge_bases[{i}]", f"not a knowledge base name: {name!r:.80}"
                    )
                )
            elif name not in names:
                names.append(name)
    if violations:
        raise SchemaError(sorted(violations, key=_field_order))
    return query, names, mode


_FIELDS = ("query", "knowledge_bases", "mode", "top_k", "score_threshold")


def _field_order(violation: FieldViolation) -> int:
    """Violations in the request's field order (a base's name with its list)."""
    return _FIELDS.index(violation.field.split("[", 1)[0])


def check_search_terms(
    query: Any, mode: Any, top_k: Any, score_threshold: Any, limits: Limits
) -> None:
    """`check_search` without the bases: for a search of every readable base when there is
    none, so bad terms are refused all the same.

    Raises:
        SchemaError: ``INVALID_SCHEMA`` listing every bad field.
    """
    if violations := _term_violations(query, mode, top_k, score_threshold, limits):
        raise SchemaError(violations)


def _term_violations(
    query: Any, mode: Any, top_k: Any, score_threshold: Any, limits: Limits
) -> list[FieldViolation]:
    violations: list[FieldViolation] = []
    if not isinstance(query, str) or not query.strip():
        violations.append(FieldViolation("query", "must be a non-blank string"))
    elif len(query) > limits.max_query_chars:
        violations.append(FieldViolation("query", f"at most {limits.max_query_chars} characters"))
    if mode not in SEARCH_MODES:
        violations.append(FieldViolation("mode", f"one of {', '.join(SEARCH_MODES)}; got {mode!r}"))
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
        violations.append(FieldViolation("top_k", f"an integer 1-{MAX_TOP_K}; got {top_k!r}"))
    if score_threshold is not None and (
        isinstance(score_threshold, bool)
        or not isinstance(score_threshold, int | float)
        or not math.isfinite(score_threshold)
    ):
        violations.append(FieldViolation("score_threshold", "a finite number, or None for none"))
    return violations
