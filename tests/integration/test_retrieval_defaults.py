"""The retrieval service's defaults where a request leaves a field 0: a search returns at
most `DEFAULT_TOP_K` hits, and a negative chunk size is refused on that field alone (its
derived overlap is never blamed)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from hookmesh.client import RetrievalClient
from hookmesh.errors import field_violations_of, reason_of, status_of
from hookmesh.retrieval import Document
from hookmesh.services.retrieval import load_retrieval_config, start_retrieval_service
from hookmesh.services.retrieval._servicer import DEFAULT_TOP_K
from hookmesh.v1 import retrieval_pb2, retrieval_pb2_grpc
from tests.agent_helpers import SHORT_TIMEOUT

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def target(tmp_path: Path) -> AsyncIterator[str]:
    config = load_retrieval_config(None, store=f"sqlite:///{tmp_path}/kb.db")
    running = await start_retrieval_service(config, address="127.0.0.1:0")
    try:
        yield f"127.0.0.1:{running.port}"
    finally:
        await running.stop(None)


async def test_a_search_without_top_k_returns_the_default_number_of_hits(target: str) -> None:
    assert DEFAULT_TOP_K == 5
    async with RetrievalClient(target, timeout=SHORT_TIMEOUT) as client:
        await client.create_knowledge_base("kb")
        docs = [Document(f"d{i}", f"Salaries are paid monthly, note {i}.") for i in range(7)]
        await client.ingest("kb", docs)
        async with grpc.aio.insecure_channel(target) as channel:
            stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
            request = retrieval_pb2.SearchRequest(query="salaries", knowledge_bases=["kb"])
            answer = await stub.Search(request, timeout=SHORT_TIMEOUT)
    assert len(answer.hits) == DEFAULT_TOP_K


async def test_a_negative_chunk_size_is_refused_on_that_field_alone(target: str) -> None:
    async with grpc.aio.insecure_channel(target) as channel:
        stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
        request = retrieval_pb2.CreateKnowledgeBaseRequest(
            name="kb", chunking=retrieval_pb2.ChunkingOptions(max_tokens=-5)
        )
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.CreateKnowledgeBase(request, timeout=SHORT_TIMEOUT)
    status = status_of(caught.value)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert status is not None
    assert [v.field for v in field_violations_of(status)] == ["chunking.max_tokens"]


async def _ingest(target: str, texts: list[str]) -> retrieval_pb2.IngestResponse:
    async def requests() -> AsyncIterator[retrieval_pb2.IngestRequest]:
        for i, text in enumerate(texts):
            yield retrieval_pb2.IngestRequest(
                knowledge_base="kb", document=retrieval_pb2.Document(id=f"d{i}", text=text)
            )

    async with grpc.aio.insecure_channel(target) as channel:
        stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
        return await stub.Ingest(requests(), timeout=SHORT_TIMEOUT)


async def test_the_ingest_bounds_are_inclusive(tmp_path: Path) -> None:
    """Exactly `max_documents_per_ingest` documents pass, one more ends the stream; a text
    of exactly `max_document_chars` is stored, one character more is that document's error."""
    config = load_retrieval_config(
        None,
        store=f"sqlite:///{tmp_path}/kb.db",
        max_documents_per_ingest=3,
        max_document_chars=300,
    )
    running = await start_retrieval_service(config, address="127.0.0.1:0")
    target = f"127.0.0.1:{running.port}"
    try:
        async with RetrievalClient(target, timeout=SHORT_TIMEOUT) as client:
            await client.create_knowledge_base("kb")
        answer = await _ingest(target, ["a" * 300, "b" * 301, "c"])
        assert answer.received_count == 3
        assert [(e.index, e.reason) for e in answer.errors] == [(1, "DOCUMENT_TOO_LARGE")]
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await _ingest(target, ["a", "b", "c", "d"])
        status = status_of(caught.value)
        assert status is not None and reason_of(status) == "TOO_MANY_DOCUMENTS"
    finally:
        await running.stop(None)


async def test_a_bad_document_is_its_own_error_and_a_repeated_id_keeps_the_last(
    target: str,
) -> None:
    """A document with a malformed id, and one whose metadata holds NaN, fail alone (the
    stream goes on); an id sent twice in one stream ends as its last version."""
    async with RetrievalClient(target, timeout=SHORT_TIMEOUT) as client:
        await client.create_knowledge_base("kb")

    async def requests() -> AsyncIterator[retrieval_pb2.IngestRequest]:
        for doc_id, text in (("d1", "old text"), ("bad\x01id", "x"), ("nan", "y")):
            document = retrieval_pb2.Document(id=doc_id, text=text)
            if doc_id == "nan":
                document.metadata.update({"score": float("nan")})
            yield retrieval_pb2.IngestRequest(knowledge_base="kb", document=document)
        yield retrieval_pb2.IngestRequest(
            knowledge_base="kb", document=retrieval_pb2.Document(id="d1", text="new text")
        )

    async with grpc.aio.insecure_channel(target) as channel:
        stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
        answer = await stub.Ingest(requests(), timeout=SHORT_TIMEOUT)
    assert answer.received_count == 4
    assert [e.index for e in answer.errors] == [1, 2]
    async with RetrievalClient(target, timeout=SHORT_TIMEOUT) as client:
        assert (await client.get_document("kb", "d1")).text == "new text"


async def test_a_chunk_overlap_left_0_is_half_the_chunk_size_up_to_the_default(
    target: str,
) -> None:
    async with RetrievalClient(target, timeout=SHORT_TIMEOUT) as client:
        small = await client.create_knowledge_base("small", max_tokens=41)
        large = await client.create_knowledge_base("large", max_tokens=200)
    assert (small.chunking.overlap_tokens, large.chunking.overlap_tokens) == (20, 32)
