"""Validation of memory requests, and the errors a memory store raises."""

from __future__ import annotations

import re
import unicodedata
from typing import Any

import grpc

from hookmesh.errors import FieldViolation, RequestError, SchemaError
from hookmesh.retrieval import Limits, MetadataValue
from hookmesh.retrieval import check_metadata as check_document_metadata

from ._types import MemoryLimits, MemoryScope

_MAX_ID = 128
_MAX_KEY = 100
_MAX_STRING_VALUE = 2048
MEMORY_ID = re.compile(r"^[0-9a-f]{32}$")
"""What a memory id looks like."""


def memory_not_found(memory_id: str) -> RequestError:
    """NOT_FOUND / ``MEMORY_NOT_FOUND`` (also for another user's memory: no existence leak)."""
    return RequestError(
        grpc.StatusCode.NOT_FOUND,
        "MEMORY_NOT_FOUND",
        f"there is no memory {memory_id!r} for this user",
        metadata={"memoryId": memory_id},
    )


def _control(text: str) -> bool:
    return any(unicodedata.category(c) == "Cc" for c in text)


def _name(value: Any, field: str, required: bool, out: list[FieldViolation]) -> str | None:
    if value is None or value == "":
        if required:
            out.append(FieldViolation(field, "required: 1-128 characters"))
        return None
    if not isinstance(value, str) or len(value) > _MAX_ID or _control(value):
        out.append(FieldViolation(field, "1-128 characters without control characters"))
        return None
    return value


def check_scope(scope: Any, field: str = "scope") -> MemoryScope:
    """The scope, if its user is set and every id follows the rules.

    Raises:
        SchemaError: ``INVALID_SCHEMA`` naming each bad id (``scope.user_id``...).
    """
    if not isinstance(scope, MemoryScope):
        raise SchemaError.single(field, "a MemoryScope with at least a user_id")
    out: list[FieldViolation] = []
    user = _name(scope.user_id, f"{field}.user_id", True, out)
    agent = _name(scope.agent_id, f"{field}.agent_id", False, out)
    session = _name(scope.session_id, f"{field}.session_id", False, out)
    if out:
        raise SchemaError(out)
    assert user is not None
    return MemoryScope(user, agent, session)


def check_user_and_id(user_id: Any, memory_id: Any) -> tuple[str, str]:
    """The user and memory ids of a single-memory call.

    Raises:
        SchemaError: ``INVALID_SCHEMA`` naming ``user_id`` and/or ``memory_id``.
    """
    out: list[FieldViolation] = []
    user = _name(user_id, "user_id", True, out)
    if not isinstance(memory_id, str) or not MEMORY_ID.fullmatch(memory_id):
        out.append(FieldViolation("memory_id", "a memory id: 32 lowercase hexadecimal characters"))
    if out:
        raise SchemaError(out)
    assert user is not None
    return user, memory_id


def check_text(text: Any, field: str, limits: MemoryLimits) -> str:
    """A non-blank fact within the length limit, stripped.

    Raises:
        SchemaError: ``INVALID_SCHEMA``.
    """
    if not isinstance(text, str) or not text.strip():
        raise SchemaError.single(field, "must be a non-blank text")
    text = text.strip()
    if len(text) > limits.max_text_chars:
        raise SchemaError.single(
            field, f"{len(text)} characters; the limit is {limits.max_text_chars}"
        )
    return text


def _integral(value: MetadataValue) -> MetadataValue:
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def check_metadata(metadata: Any, limits: MemoryLimits) -> dict[str, MetadataValue]:
    """A plain copy of the caller's metadata, if its keys and values follow the knowledge
    store's rules (memories are its documents), keys shortened to leave room for the
    layout's prefix.

    Integral floats (protobuf numbers) come back as ints.

    Raises:
        SchemaError: ``INVALID_SCHEMA`` naming ``metadata`` or ``metadata[key]``.
    """
    if metadata is None:
        return {}
    bounds = Limits(
        max_metadata_keys=limits.max_metadata_keys, max_metadata_value_chars=_MAX_STRING_VALUE
    )
    checked = check_document_metadata(metadata, "metadata", bounds, max_key_chars=_MAX_KEY)
    return {key: _integral(value) for key, value in checked.items()}


def check_search(
    query: Any, top_k: Any, score_threshold: Any, limits: MemoryLimits
) -> tuple[str, int, float]:
    """The query, top_k and threshold, if in bounds (``top_k`` 0 means 5).

    Raises:
        SchemaError: ``INVALID_SCHEMA`` listing every bad field.
    """
    out: list[FieldViolation] = []
    if not isinstance(query, str) or not query.strip():
        out.append(FieldViolation("query", "must be a non-blank text"))
    elif len(query) > limits.max_query_chars:
        out.append(FieldViolation("query", f"at most {limits.max_query_chars} characters"))
    if top_k == 0:
        top_k = 5
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= limits.max_top_k:
        out.append(FieldViolation("top_k", f"an integer 1-{limits.max_top_k} (0 means 5)"))
    if (
        isinstance(score_threshold, bool)
        or not isinstance(score_threshold, int | float)
        or not -1.0 <= score_threshold <= 1.0
    ):
        out.append(FieldViolation("score_threshold", "a cosine similarity, -1 to 1 (0: none)"))
    if out:
        raise SchemaError(out)
    return query, top_k, float(score_threshold)


def check_page(page_size: Any, page_token: Any, limits: MemoryLimits) -> tuple[int, str | None]:
    """The page size (0 means 50) and the id to continue after.

    Raises:
        SchemaError: ``INVALID_SCHEMA`` naming ``page_size`` or ``page_token``.
    """
    out: list[FieldViolation] = []
    if page_size == 0:
        page_size = 50
    if (
        isinstance(page_size, bool)
        or not isinstance(page_size, int)
        or not 1 <= page_size <= limits.max_page_size
    ):
        out.append(FieldViolation("page_size", f"an integer 1-{limits.max_page_size} (0 means 50)"))
    if page_token and (not isinstance(page_token, str) or not MEMORY_ID.fullmatch(page_token)):
        out.append(FieldViolation("page_token", "pass back a next_page_token unchanged"))
    if out:
        raise SchemaError(out)
    return page_size, page_token or None
