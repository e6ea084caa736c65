"""Request bounds: each violation is a SchemaError with a field, a reason and a gRPC code."""

from __future__ import annotations

import grpc
import pytest

from hookmesh.errors import SchemaError, field_violations_of, reason_of, to_status
from hookmesh.retrieval import ChunkingOptions, Document, Limits
from hookmesh.retrieval._backend import query_terms
from hookmesh.retrieval._limits import (
    check_chunking,
    check_document_id,
    check_documents,
    check_knowledge_base_name,
    check_metadata,
    check_search,
    knowledge_base_not_found,
)

LIMITS = Limits(max_document_chars=100, max_batch_documents=3, max_batch_chars=150)


def _fails(fn: object, *args: object, reason: str = "INVALID_SCHEMA") -> SchemaError:
    with pytest.raises(SchemaError) as caught:
        fn(*args)  # type: ignore[operator]
    error = caught.value
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert error.reason == reason
    status = to_status(error)
    assert reason_of(status) == reason
    assert field_violations_of(status)
    return error


@pytest.mark.parametrize("name", ["a", "docs", "product-faq_2", "x" * 63])
def test_good_knowledge_base_names(name: str) -> None:
    assert check_knowledge_base_name(name) == name


@pytest.mark.parametrize("name", ["", "Docs", "1abc", "-x", "a b", "x" * 64, "é", None, 3])
def test_bad_knowledge_base_names(name: object) -> None:
    error = _fails(check_knowledge_base_name, name, "knowledge_base.name")
    assert error.violations[0].field == "knowledge_base.name"


def test_document_ids() -> None:
    assert check_document_id("file.md#section 2/ü", "id")
    for bad in ["", "x" * 257, "tab\there", "nul\x00", 5]:
        _fails(check_document_id, bad, "documents[0].id")


def test_metadata_rules() -> None:
    ok = {"s": "x", "i": -3, "f": 1.5, "b": True, "n": None, "key with spaces.and.dots": "y"}
    assert check_metadata(ok, "metadata", LIMITS) == ok
    for bad in [
        {"nested": {"a": 1}},
        {"list": [1]},
        {'quo"te': 1},
        {"back\\slash": 1},
        {"": 1},
        {"nan": float("nan")},
        {"big": 2**63},
        {1: 1},
        {"long": "x" * 3000},
    ]:
        _fails(check_metadata, bad, "metadata", LIMITS)
    _fails(check_metadata, {f"k{i}": i for i in range(33)}, "metadata", LIMITS)
    _fails(check_metadata, ["not", "a", "mapping"], "metadata", LIMITS)


def test_batches() -> None:
    docs = [Document("a", "x" * 50), Document("b", "y" * 50)]
    assert len(check_documents(docs, LIMITS)) == 2
    error = _fails(check_documents, [Document("a", "x" * 101)], LIMITS, reason="DOCUMENT_TOO_LARGE")
    assert error.violations[0].field == "documents[0].text"
    _fails(
        check_documents, [Document(str(i), "") for i in range(4)], LIMITS, reason="BATCH_TOO_LARGE"
    )
    _fails(
        check_documents,
        [Document(str(i), "z" * 60) for i in range(3)],
        LIMITS,
        reason="BATCH_TOO_LARGE",
    )
    error = _fails(check_documents, [Document("a", ""), Document("a", "")], LIMITS)
    assert error.violations[0].field == "documents[1].id"
    _fails(check_documents, Document("a", ""), LIMITS)
    _fails(check_documents, [Document("a", "", {"x": [1]})], LIMITS)


def test_search_arguments_list_every_violation() -> None:
    assert check_search("q", ["a", "b", "a"], "hybrid", 50, 0.5, LIMITS) == (
        "q",
        ["a", "b"],
        "hybrid",
    )
    error = _fails(check_search, " ", "kb", "fuzzy", 51, float("inf"), LIMITS)
    assert [v.field for v in error.violations] == [
        "query", "knowledge_bases", "mode", "top_k", "score_threshold",
    ]  # fmt: skip
    for top_k in [0, 51, True, 2.0]:
        _fails(check_search, "q", ["a"], "dense", top_k, None, LIMITS)
    _fails(check_search, "q", [], "dense", 5, None, LIMITS)
    _fails(check_search, "q", [f"kb{i}" for i in range(17)], "dense", 5, None, LIMITS)
    error = _fails(check_search, "q", ["ok", "Bad"], "dense", 5, None, LIMITS)
    assert error.violations[0].field == "knowledge_bases[1]"
    _fails(check_search, "q" * 5000, ["a"], "dense", 5, None, LIMITS)


def test_chunking_options() -> None:
    check_chunking(ChunkingOptions(128, 64), 254, "chunking")
    error = _fails(check_chunking, ChunkingOptions(255, 0), 254, "chunking")
    assert error.violations[0].field == "chunking.max_tokens"
    error = _fails(check_chunking, ChunkingOptions(100, 51), 254, "chunking")
    assert error.violations[0].field == "chunking.overlap_tokens"
    _fails(check_chunking, ChunkingOptions(4, 0), 254, "chunking")


def test_not_found_maps_to_grpc() -> None:
    error = knowledge_base_not_found("faq")
    assert error.code == grpc.StatusCode.NOT_FOUND
    status = to_status(error)
    assert reason_of(status) == "KNOWLEDGE_BASE_NOT_FOUND"
    assert status.code == grpc.StatusCode.NOT_FOUND.value[0]
    assert error.metadata == {"knowledgeBase": "faq"}


def test_query_terms() -> None:
    assert query_terms("What IS the capital of France? capital, cafés & naïve_words 42") == [
        "capital", "france", "cafés", "naïve", "words", "42",
    ]  # fmt: skip
    assert query_terms("to be or not to be") == []
    assert query_terms('"quotes" OR NEAR(x) AND -y *') == ["quotes", "near", "x", "y"]
    assert len(query_terms(" ".join(f"w{i}" for i in range(100)))) == 64
